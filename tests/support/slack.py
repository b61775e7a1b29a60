"""One slack factor for every timeout in the suite.

`BTU_TEST_SLACK` (default 1) multiplies each of them, so a loaded or slow machine widens them all
at once. A wait returns as soon as what it waits for happens: the factor only changes how long a
failing test takes to say so.
"""

from __future__ import annotations

import os


def _factor() -> float:
	text = os.environ.get("BTU_TEST_SLACK", "1")
	try:
		factor = float(text)
	except ValueError:
		factor = 0.0
	if not factor >= 1:
		raise RuntimeError(f"BTU_TEST_SLACK={text!r}: give a number of 1 or more (2 doubles every timeout)")
	return factor


SLACK = _factor()


def patient(seconds: float) -> float:
	"""`seconds` widened by the slack factor."""
	return seconds * SLACK
