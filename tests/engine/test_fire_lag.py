"""One schedule every second: consecutive slots, one job each, each run by a plain `rq worker`."""

from __future__ import annotations

import os
import signal
from datetime import timezone

import pytest
from rq.job import Job

from btu.scheduler_daemon.store.outcomes import FireOutcome
from tests.engine.helpers import ONE_SECOND, gaps, percentile, recent_fires, report, stop_worker, text, wait_until
from tests.support.slack import patient

pytestmark = pytest.mark.versions

SECONDS = int(os.environ.get("BTU_LAG_SECONDS", "60"))


@pytest.mark.slow
def test_every_second_for_a_minute_each_job_run_by_rq_worker(engine_bench, processes, r, redis_url):
	bench, data = engine_bench()
	site = data.site.name
	runs_key = "test:runs"
	task = data.insert_task(
		function_string="tests.engine.tasks.record", arguments={"key": runs_key}, desc_short="record a run"
	)
	schedule = data.insert_schedule(task, run_frequency="Cron Style", cron_string=ONE_SECOND)
	queue = bench.queue_name("default")
	worker = processes.worker(redis_url, queue)
	scheduler = processes.scheduler(bench.path)

	def fired():
		fires = [f for f in recent_fires(r, site) if f["schedule"] == schedule]
		return fires if len(fires) >= SECONDS else None

	fires = wait_until(fired, SECONDS + 30, f"{SECONDS} fires of {schedule}", interval=0.2)
	scheduler.signal(signal.SIGTERM)
	assert scheduler.process.wait(patient(10)) == 0
	fires = [f for f in recent_fires(r, site) if f["schedule"] == schedule]
	ids = [f["job_id"] for f in fires]
	slots = [f["slot_ms"] for f in fires]

	assert {f["outcome"] for f in fires} == {FireOutcome.ENQUEUED}
	assert len(ids) == len(set(ids)), "a slot was enqueued twice"
	assert gaps(slots) == [], "slots are not consecutive seconds"
	assert len(fires) >= SECONDS

	def all_ran():
		ran = [text(i) for i in r.lrange(runs_key, 0, -1)]
		return ran if len(ran) >= len(ids) else None

	ran = wait_until(all_ran, 60, "the worker ran every job", interval=0.2)
	stop_worker(worker)
	assert sorted(ran) == sorted(ids), "each job runs exactly once"

	lags = []
	for job_id, slot_ms in zip(ids, slots):
		job = Job.fetch(job_id, connection=r)
		assert job.func_name == "tests.engine.tasks.record"
		assert job.kwargs == {"key": runs_key}
		assert job.origin == queue
		assert job.get_status() == "finished"
		enqueued = job.enqueued_at
		if enqueued.tzinfo is None:  # rq 1.x keeps naive UTC
			enqueued = enqueued.replace(tzinfo=timezone.utc)
		lags.append(enqueued.timestamp() * 1000 - slot_ms)
	assert all(-5 < lag < 5000 for lag in lags), f"lags out of any sane bound: {lags}"
	first = lags[:SECONDS]
	report(
		"fire lag, 1 schedule every second (rq executor)",
		f"{len(first)} jobs: p50 {percentile(first, 50):.1f} ms, p99 {percentile(first, 99):.1f} ms, "
		f"max {max(first):.1f} ms (enqueued_at - slot from each job hash)",
	)
	print("lags ms: " + ", ".join(f"{lag:.1f}" for lag in lags))
