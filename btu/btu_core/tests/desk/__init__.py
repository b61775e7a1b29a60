"""The Desk in a real browser. `bench --site S run-tests --module btu.btu_core.tests.desk` runs the whole suite alone
(load_tests); `run-tests --app btu` runs it with the rest of tier 2."""

import importlib
from pathlib import Path


def load_tests(loader, tests, pattern):
	for path in sorted(Path(__file__).parent.glob("test_*.py")):
		tests.addTests(loader.loadTestsFromModule(importlib.import_module(f"{__name__}.{path.stem}")))
	return tests
