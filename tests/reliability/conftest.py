"""Reliability fixtures: the engine tests' scheduler processes and dev benches, reused as they are."""

from __future__ import annotations

# Imported so pytest registers them here too: `processes`, `engine_bench`, and the hook
# that lets `processes` print the schedulers' logs when a test fails.
from tests.engine.conftest import engine_bench, processes, pytest_runtest_makereport  # noqa: F401
