"""Sample task functions for the demo (`python -m devbench demo`), run by a plain `rq worker`.

Declared runnable by the `btu_tasks` hook in this app's hooks.py.
"""

from __future__ import annotations

from datetime import datetime, timezone


def say_hello(name: str = "world") -> str:
	message = f"Hello, {name}! It is {datetime.now(timezone.utc):%H:%M:%S.%f} UTC"
	print(message)
	return message


def add(a: int, b: int) -> int:
	print(f"{a} + {b} = {a + b}")
	return a + b
