"""A worker's candidate that ended while its worker lives is started again at the worker's maintenance
(worker_candidate.Candidate.restart_at_maintenance, through rq's Worker.run_maintenance_tasks: marked `versions`, as
rq's worker is what calls it), and only by the worker that started it.
"""

from __future__ import annotations

import os
import signal
import subprocess
import time
from pathlib import Path

import pytest

from btu.scheduler_daemon.leading import worker_candidate
from tests.engine.helpers import child_env, wait_until
from tests.engine.test_failover import assert_exactly_once, every_second_schedules, newest_fire_ms
from tests.engine.test_worker_candidates import LEASE_TTL, leader_info
from tests.support.slack import patient

pytestmark = pytest.mark.versions


@pytest.mark.slow
def test_a_candidate_that_ended_is_started_again_at_its_workers_maintenance(engine_bench, r, monkeypatch):
	"""Killed while its worker lives (the OOM killer, an operator): the worker's next maintenance starts it again, and
	it leads again with every slot fired once."""
	from rq import Queue, Worker

	bench, data = engine_bench()
	site = data.site.name
	names = every_second_schedules(data, 5)
	environment = {
		**child_env(),
		"BTU_SCHEDULER_EXECUTOR": "rq",
		"BTU_SCHEDULER_LEASE_TTL_SECS": LEASE_TTL,
		worker_candidate.ENV: "1",
	}
	for key, value in environment.items():
		monkeypatch.setenv(key, value)
	monkeypatch.setattr(Worker, "run_maintenance_tasks", Worker.run_maintenance_tasks)  # put back after the test
	candidate = worker_candidate.start(bench.path)  # this process is its worker
	try:
		candidate.restart_at_maintenance()
		worker = Worker([Queue("btu-test-maintenance", connection=r)], connection=r)
		wait_until(lambda: leader_info(r).get("pid") == candidate.pid, patient(30), "the candidate leads")
		wait_until(lambda: newest_fire_ms(r, site), patient(20), "a first fire")
		worker.run_maintenance_tasks()
		assert candidate.restarts == 0, "a live candidate was started again"
		killed = candidate.pid
		os.kill(killed, signal.SIGKILL)
		candidate.process.wait()
		worker.run_maintenance_tasks()
		assert candidate.pid != killed and candidate.restarts == 1
		wait_until(lambda: leader_info(r).get("pid") == candidate.pid, patient(30), "the started one leads")
		log = (Path(bench.path) / "logs" / worker_candidate.LOG_NAME).read_text()
		assert f"candidate_restarted worker_pid={os.getpid()} ended_with=-9 restarts=1 pid={candidate.pid}" in log
		time.sleep(2.5)
	finally:
		candidate.process.terminate()
		candidate.process.wait(patient(10))
	assert_exactly_once(r, bench, site, names, int(time.time() * 1000))


def test_a_pool_workers_maintenance_leaves_the_pools_candidate_alone(tmp_path):
	"""A worker-pool's workers are forked from the pool that started the candidate: only the pool may start it."""
	ended = subprocess.Popen(["true"])
	ended.wait()
	candidate = worker_candidate.Candidate(tmp_path, os.getppid())
	candidate.process = ended
	assert not candidate.ensure()
	assert candidate.process is ended
