"""requirements.txt admits both Frappe versions' pins, so `bench get-app` never fights Frappe v15 or v16 over a
version."""

from __future__ import annotations

from pathlib import Path

import pytest
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

pytestmark = pytest.mark.versions

ROOT = Path(__file__).resolve().parents[2]


def lines(path: Path) -> list[str]:
	return [line.split("#")[0].strip() for line in path.read_text().splitlines() if line.split("#")[0].strip()]


def requirements() -> dict[str, Requirement]:
	return {canonicalize_name(r.name): r for r in map(Requirement, lines(ROOT / "requirements.txt"))}


@pytest.mark.parametrize("frappe", ["frappe-v15", "frappe-v16"])
def test_every_pin_of_frappe_satisfies_requirements(frappe):
	ours = requirements()
	checked = []
	for pin in map(Requirement, lines(ROOT / "constraints" / f"{frappe}.txt")):
		mine = ours.get(canonicalize_name(pin.name))
		if mine is None:
			continue
		# "==x" and "~=x" both admit x itself: the lowest version Frappe may install.
		(lowest,) = [spec.version for spec in pin.specifier]
		assert mine.specifier.contains(lowest, prereleases=True), (
			f"requirements.txt {mine} refuses {frappe}'s {pin}; widen the range"
		)
		checked.append(pin.name)
	assert {"rq", "redis", "hiredis"} <= set(checked), checked
