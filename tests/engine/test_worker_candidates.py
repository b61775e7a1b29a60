"""Each Frappe worker's scheduler candidate (leading/worker_candidate.py): it competes for the lease
like any scheduler, ends with its worker and hands the lease over, yields to a dedicated scheduler without
flapping, and the setting turns it off. Every slot fires exactly once across each switch.

A worker here is tests/engine/fake_worker.py, which starts its candidate as btu/commands.py does in `bench worker`
(tier 2 does it with Frappe's own workers).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from btu.scheduler_daemon.leading import worker_candidate
from btu.shared import liveness, protocol
from tests.engine.helpers import REPO, child_env, lease, wait_until
from tests.engine.test_failover import assert_exactly_once, every_second_schedules, newest_fire_ms
from tests.support.keys import KEYS
from tests.support.slack import patient

LEASE_TTL = "2"


class Workers:
	"""Fake workers (each with its candidate) a test started; each is ended, and its candidate with it."""

	def __init__(self, log_dir: Path):
		self.log_dir = log_dir
		self.started: list[subprocess.Popen] = []

	def start(self, bench_path: Path) -> subprocess.Popen:
		# The setting in the environment too, as a worker's service may have it: the candidate inherits it.
		env = {
			**child_env(),
			"BTU_SCHEDULER_EXECUTOR": "rq",
			"BTU_SCHEDULER_LEASE_TTL_SECS": LEASE_TTL,
			worker_candidate.ENV: "1",
		}
		log = open(self.log_dir / f"fake-worker-{len(self.started) + 1}.log", "ab")
		worker = subprocess.Popen(
			[sys.executable, "-m", "tests.engine.fake_worker", str(bench_path)],
			stdout=log,
			stderr=subprocess.STDOUT,
			cwd=REPO,
			env=env,
		)
		log.close()
		self.started.append(worker)
		return worker

	def close(self) -> None:
		for worker in self.started:
			if worker.poll() is None:
				worker.kill()
				worker.wait()


@pytest.fixture
def workers(tmp_path):
	started = Workers(tmp_path)
	yield started
	started.close()


def candidates(r) -> list[dict]:
	return [p for p in liveness.processes(r, KEYS) if p.get("kind") == liveness.WORKER]


def leader_info(r) -> dict:
	return liveness.leader(r, KEYS) or {}


def alive(pid: int) -> bool:
	try:
		os.kill(pid, 0)
	except ProcessLookupError:
		return False
	# A zombie (exited, not yet reaped by init) is gone too.
	stat = Path(f"/proc/{pid}/stat")
	return not (stat.exists() and stat.read_text().split(") ", 1)[1].startswith("Z"))


@pytest.mark.slow
def test_a_killed_or_stopped_worker_hands_its_candidates_lead_over_exactly_once(engine_bench, workers, r):
	bench, data = engine_bench()
	site = data.site.name
	names = every_second_schedules(data, 20)
	first, second = workers.start(bench.path), workers.start(bench.path)
	wait_until(lambda: len(candidates(r)) == 2, patient(30), "both workers' candidates")
	wait_until(lambda: leader_info(r).get("kind") == liveness.WORKER, patient(20), "a candidate leads")
	wait_until(lambda: newest_fire_ms(r, site), patient(20), "a first fire")
	leading = next(w for w in (first, second) if leader_info(r).get("worker_pid") == w.pid)
	other = second if leading is first else first
	candidate_pid = leader_info(r)["pid"]
	time.sleep(1.5)
	leading.kill()  # kill -9: the kernel tells its candidate (SIGTERM), which hands the lease over
	killed_ms = time.time() * 1000
	wait_until(lambda: not alive(candidate_pid), patient(10), "the killed worker's candidate exits")
	wait_until(lambda: leader_info(r).get("worker_pid") == other.pid, patient(10), "the other worker's leads")
	took_over_ms = wait_until(
		lambda: (lambda ms: ms if ms > killed_ms else None)(newest_fire_ms(r, site)), patient(10), "its fire", 0.002
	)
	assert took_over_ms - killed_ms < float(LEASE_TTL) * 1000 + 1500
	# A deploy: the remaining worker stopped (SIGTERM) while a third starts.
	third = workers.start(bench.path)
	wait_until(lambda: len(candidates(r)) == 2, patient(30), "the third worker's candidate")
	time.sleep(1.5)
	other.send_signal(signal.SIGTERM)
	assert other.wait(patient(10)) == 0
	wait_until(lambda: leader_info(r).get("worker_pid") == third.pid, patient(10), "the third worker's leads")
	time.sleep(2.5)
	third.send_signal(signal.SIGTERM)
	third.wait(patient(10))
	wait_until(lambda: not candidates(r), patient(15), "every candidate gone with its worker")
	assert_exactly_once(r, bench, site, names, int(time.time() * 1000))


@pytest.mark.slow
def test_a_dedicated_scheduler_leads_in_preference_and_candidates_stand_by(engine_bench, workers, processes, r):
	bench, data = engine_bench()
	site = data.site.name
	names = every_second_schedules(data, 10)
	workers.start(bench.path)
	wait_until(lambda: leader_info(r).get("kind") == liveness.WORKER, patient(30), "the candidate leads")
	wait_until(lambda: newest_fire_ms(r, site), patient(20), "a first fire")
	dedicated = processes.scheduler(bench.path, "--lease-ttl-secs", LEASE_TTL)
	wait_until(lambda: leader_info(r).get("pid") == dedicated.pid, patient(20), "the dedicated scheduler leads")
	assert leader_info(r)["kind"] == liveness.DEDICATED
	epoch = lease(r)
	time.sleep(6)  # more than a heartbeat: no candidate took the lease back
	assert lease(r) == epoch, "the lease changed hands while a dedicated scheduler ran"
	[candidate] = candidates(r)
	assert candidate["role"] == "standby"
	dedicated.kill()
	wait_until(lambda: leader_info(r).get("kind") == liveness.WORKER, patient(15), "the candidate leads again")
	time.sleep(2.5)
	assert_exactly_once(r, bench, site, names, int(time.time() * 1000))


def test_the_setting_off_starts_no_candidate(make_bench, tmp_path):
	bench = make_bench()
	config_path = Path(bench.path) / "sites" / "common_site_config.json"
	config = json.loads(config_path.read_text())
	for value in (False, 0, "false", "off"):
		config_path.write_text(json.dumps({**config, worker_candidate.SETTING: value}))
		assert worker_candidate.start(bench.path) is None or pytest.fail(f"{value!r} started one")
	config_path.write_text(json.dumps({**config, worker_candidate.SETTING: True}))
	assert worker_candidate.enabled(json.loads(config_path.read_text()), {})
	assert not worker_candidate.enabled({worker_candidate.SETTING: True}, {worker_candidate.ENV: "0"})
	assert worker_candidate.enabled({worker_candidate.SETTING: False}, {worker_candidate.ENV: "1"})


@pytest.mark.parametrize(
	"argv, wanted",
	[
		(["frappe", "worker"], True),
		(["bench", "worker", "--queue", "short,default"], True),
		(["frappe", "worker-pool", "--num-workers", "4"], True),
		(["frappe", "worker", "--burst"], False),
		(["frappe", "--site", "a", "migrate"], False),
		(["frappe", "schedule"], False),
	],
)
def test_only_a_long_lived_worker_starts_one(argv, wanted):
	assert worker_candidate.wanted(argv) is wanted


def test_a_candidate_sees_its_worker_go(tmp_path):
	"""ParentWatch: its parent is no longer the worker (the worker died): stop."""
	import threading

	stop = threading.Event()
	watch = worker_candidate.ParentWatch(os.getppid(), stop)
	assert watch.alive()
	gone = worker_candidate.ParentWatch(os.getppid() + 1_000_000, stop)
	thread = gone.start()
	thread.join(patient(5))
	assert stop.is_set()


def test_status_says_where_the_leader_runs():
	from btu.scheduler_daemon.commands.status import runs_where

	assert runs_where({"kind": "worker", "worker_pid": 41}) == "in Frappe worker pid 41"
	assert runs_where({"kind": "dedicated"}) == runs_where({}) == "dedicated process"
	assert KEYS.processes  # the heartbeat list the candidates are read from
