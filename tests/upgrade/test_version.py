"""The upgrade from the original BTU is an upgrade to tools that compare versions (bench, pip, Frappe's About)."""

from __future__ import annotations

import btu

ORIGINAL_LAST = (0, 8, 0)  # Datahenge/btu's version-15 branch


def test_this_version_is_above_the_originals():
	numbers = tuple(int(part) for part in btu.__version__.split("."))
	assert numbers > ORIGINAL_LAST, f"btu {btu.__version__} would read as a downgrade of the original's 0.8.0"
