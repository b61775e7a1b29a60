"""Engine fixtures: scheduler and worker subprocesses, ended after each test."""

from __future__ import annotations

import uuid

import pytest

from devbench.data import SiteData
from tests.engine import helpers


@pytest.fixture
def processes(tmp_path, request):
	"""Start schedulers and workers with `processes.scheduler(...)` / `processes.worker(...)`."""
	started = helpers.Processes(tmp_path)
	yield started
	started.close()
	report = getattr(request.node, "rep_call", None)
	if report is not None and report.failed:
		print(started.logs())


@pytest.hookimpl(wrapper=True, tryfirst=True)
def pytest_runtest_makereport(item, call):
	report = yield
	setattr(item, f"rep_{report.when}", report)
	return report


@pytest.fixture
def engine_bench(make_bench):
	"""Factory: (bench, SiteData of its first site) with a bench_id of its own."""
	opened: list[SiteData] = []

	def make(*sites: str, **kwargs):
		kwargs.setdefault("bench_id", f"btutest{uuid.uuid4().hex[:8]}")
		bench = make_bench(*(sites or ("site1.localhost",)), **kwargs)
		data = SiteData(bench, bench.site_names()[0])
		opened.append(data)
		return bench, data

	yield make
	for data in opened:
		data.close()
