"""The Desk in a real browser. `run-tests --module btu.btu_core.tests.desk` runs the whole suite (load_tests), as
scripts/tier2-bench does on a site of its own beside the other tier-2 tests."""

import importlib
from pathlib import Path


def load_tests(loader, tests, pattern):
	for path in sorted(Path(__file__).parent.glob("test_*.py")):
		tests.addTests(loader.loadTestsFromModule(importlib.import_module(f"{__name__}.{path.stem}")))
	return tests
