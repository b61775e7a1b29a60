"""BTU with no process of its own (issue 42): Frappe's own `bench worker` processes, and nothing else of BTU's, fire
an every-second schedule; the leading worker killed (kill -9), the other stopped (SIGTERM, a deploy) while a third
starts, and every slot runs exactly once; `bench worker-pool` too; a dedicated `btu-scheduler run` leads in
preference; BTU_WORKER_CANDIDATE=0 starts none; with "Fire Frappe's Scheduled Jobs" on, Frappe stands back for the
site only while a leading candidate acknowledges it.

The workers are this bench's own (`frappe worker`, `frappe worker-pool`); each starts its candidate as every worker
does (btu/commands.py, leading/worker_candidate.py). The runs are a separate worker's, one started with
no candidate, on the long queue: a worker killed between taking a job and starting it loses that job (rq's, not the
scheduler's), and what is counted here is the scheduler's firing. No other test's scheduler runs meanwhile.
"""

from __future__ import annotations

import os
import signal
import statistics
import subprocess
import sys
import time
from datetime import datetime, timezone
from pathlib import Path

import frappe
from frappe.utils import get_bench_id, get_bench_path
from frappe.utils.background_jobs import get_queue

from btu.btu_core import scheduler_link
from btu.btu_core.scheduler_link import bench_keys
from btu.btu_core.schedules import scheduled_job_types
from btu.btu_core.tests.utils import (
	SAMPLES,
	delete_committed,
	make_schedule,
	make_task,
	patient,
	stop_processes,
	stop_scheduled_job_types,
)
from btu.scheduler_daemon.leading import worker_candidate
from btu.scheduler_daemon.store.state import State
from btu.shared import liveness, protocol
from btu.shared.instants import parse_utc_iso

try:
	from frappe.tests import IntegrationTestCase
except ImportError:
	from frappe.tests.utils import FrappeTestCase as IntegrationTestCase

QUEUE = "long"  # the runs'
CANDIDATE_QUEUE = "short"  # what the workers carrying candidates listen to
EVERY_SECOND = "* * * * * *"


class WorkerCase(IntegrationTestCase):
	def setUp(self):
		self.bench = Path(get_bench_path())
		self.python = str(self.bench / "env" / "bin" / "python")
		self.started: list[subprocess.Popen] = []
		self.redis = scheduler_link.queue_redis()
		self.drain()  # what earlier tests and migrate left on the queue (a search index build) runs first
		self.task = make_task(queue_name=QUEUE, arguments='{"name": "worker candidate"}').name
		self.schedule = make_schedule(
			self.task,
			enabled=1,
			run_frequency="Cron Style",
			cron_string=EVERY_SECOND,
			catch_up_policy="fire_all",
			catch_up_max=100,
			queue_name=QUEUE,
		).name
		frappe.db.commit()

	def tearDown(self):
		# The schedule first: a leader still up gets the deletion and fires no more while the workers stop.
		delete_committed(self.task)
		stop_processes(self.started)
		self.wait_for(lambda: not self.candidates(), 20, "every candidate gone with its worker")
		# What a leader does on the deletion's RPC, done here where none ran to get it: else the schedule's state waits
		# in Redis for the next test's leader (the name is reused), which fires its missed slots before its reconcile
		# finds the row gone.
		State(self.redis, bench_keys()).remove(frappe.local.site, self.schedule)
		# Its runs left queued were counted already; run by the next test's drain, each would wait for a row that is
		# gone (seconds each on v16).
		queue = get_queue(QUEUE)
		for job_id in queue.get_job_ids():
			if f"btu|{self.schedule}|" in job_id:
				queue.remove(job_id)

	def spawn(self, name: str, *args: str, env: dict | None = None) -> subprocess.Popen:
		log = open(self.bench / "logs" / f"btu-candidates-{name}-{len(self.started)}.log", "w")
		process = subprocess.Popen(
			[self.python, *args], cwd=self.bench / "sites", stdout=log, stderr=subprocess.STDOUT, env=env
		)
		log.close()
		self.started.append(process)
		return process

	def worker(self, env: dict | None = None, queue: str = CANDIDATE_QUEUE) -> subprocess.Popen:
		return self.spawn("worker", "-m", "frappe.utils.bench_helper", "frappe", "worker", "--queue", queue, env=env)

	def runner(self) -> subprocess.Popen:
		"""The worker that runs the schedule's jobs, with no candidate."""
		return self.worker(env={**os.environ, worker_candidate.ENV: "0"}, queue=QUEUE)

	def candidates(self) -> list[dict]:
		return [p for p in liveness.processes(self.redis, bench_keys()) if p.get("kind") == liveness.WORKER]

	def leader(self) -> dict:
		return liveness.leader(self.redis, bench_keys()) or {}

	def wait_for(self, predicate, seconds: float, what: str):
		deadline = time.monotonic() + patient(seconds)
		while time.monotonic() < deadline:
			found = predicate()
			if found:
				return found
			time.sleep(0.1)
		self.fail(f"timed out after {patient(seconds)} s: {what}")

	def logs(self) -> list:
		frappe.db.rollback()  # a fresh snapshot: the workers commit
		return frappe.get_all(
			"BTU Task Log",
			{"schedule": self.schedule},
			["name", "slot_utc", "status", "fire_lag_ms"],
			order_by="slot_utc",
		)

	def drain(self) -> None:
		"""Run what the stopped workers left queued (a burst worker starts no candidate)."""
		done = subprocess.run(
			[self.python, "-m", "frappe.utils.bench_helper", "frappe", "worker", "--burst", "--queue", QUEUE],
			cwd=self.bench / "sites",
			capture_output=True,
			timeout=patient(300),
		)
		self.assertEqual(done.returncode, 0, done.stderr[-3000:])

	def assert_each_slot_ran_once(self, since: datetime, until: datetime) -> list:
		logs = [log for log in self.logs() if since <= parse_utc_iso(log.slot_utc, "slot_utc") <= until]
		slots = [int(parse_utc_iso(log.slot_utc, "slot_utc").timestamp()) for log in logs]
		seen = [(log.slot_utc, log.status) for log in self.logs()]
		self.assertEqual(len(slots), len(set(slots)), f"a slot ran twice: {seen}")
		self.assertGreater(len(slots), 3, f"the workers fired from {since} to {until}: {seen}")
		missing = sorted(set(range(min(slots), max(slots) + 1)) - set(slots))
		self.assertEqual(missing, [], f"slots that never ran: {seen}")
		return logs


class TestTheSchedulerRunsInFrappesWorkers(WorkerCase):
	def test_workers_alone_fire_and_hand_over_exactly_once(self):
		self.runner()
		first, second = self.worker(), self.worker()
		self.wait_for(lambda: len(self.candidates()) == 2, 60, "both workers' candidates")
		self.wait_for(lambda: self.leader().get("kind") == liveness.WORKER, 30, "a worker's candidate leads")
		since = datetime.now(timezone.utc)
		self.wait_for(lambda: len(self.logs()) >= 3, 30, "runs of the every-second schedule")
		time.sleep(2)
		leading = next(w for w in (first, second) if w.pid == self.leader().get("worker_pid"))
		other = second if leading is first else first
		leading.kill()  # kill -9: its candidate is told by the kernel and hands the lease over
		killed = time.monotonic()
		self.wait_for(lambda: self.leader().get("worker_pid") == other.pid, 20, "the other worker's candidate leads")
		took_over = time.monotonic() - killed
		third = self.worker()
		self.wait_for(lambda: any(c["worker_pid"] == third.pid for c in self.candidates()), 60, "the third's candidate")
		other.send_signal(signal.SIGTERM)  # a deploy's restart
		self.wait_for(lambda: self.leader().get("worker_pid") == third.pid, 20, "the third worker's candidate leads")
		time.sleep(3)
		until = datetime.now(timezone.utc)
		third.send_signal(signal.SIGTERM)
		third.wait(patient(30))
		time.sleep(2)  # the runner's last jobs
		self.drain()
		logs = self.assert_each_slot_ran_once(since, until)
		lags = [log.fire_lag_ms for log in logs if log.fire_lag_ms is not None]
		sys.stdout.write(
			f"\nworkers: {len(logs)} slots ran once each across a kill -9 and a SIGTERM of the leading worker; "
			f"takeover {took_over:.1f} s; fire lag p50 {statistics.median(lags):.1f} ms, max {max(lags):.1f} ms\n"
		)

	def test_a_worker_pool_runs_one_candidate(self):
		pool = self.spawn(
			"pool", "-m", "frappe.utils.bench_helper", "frappe", "worker-pool", "--queue", QUEUE, "--num-workers", "2"
		)  # its workers run the jobs too
		self.wait_for(lambda: self.leader().get("worker_pid") == pool.pid, 60, "the pool's candidate leads")
		self.wait_for(lambda: len(self.logs()) >= 2, 30, "runs by the pool's workers")
		self.assertEqual([c["worker_pid"] for c in self.candidates()], [pool.pid])


class TestDedicatedAndOff(WorkerCase):
	def test_a_dedicated_scheduler_leads_in_preference(self):
		self.runner()
		self.worker()
		self.wait_for(lambda: self.leader().get("kind") == liveness.WORKER, 60, "the worker's candidate leads")
		dedicated = self.spawn("dedicated", "-m", "btu.scheduler_daemon", "run", "--bench", str(self.bench))
		self.wait_for(lambda: self.leader().get("pid") == dedicated.pid, 30, "the dedicated scheduler leads")
		epoch = self.leader()["epoch"]
		time.sleep(6)  # more than a heartbeat: no candidate took it back
		self.assertEqual((self.leader()["epoch"], self.leader()["kind"]), (epoch, liveness.DEDICATED))
		self.assertEqual([c["role"] for c in self.candidates()], ["standby"])
		dedicated.send_signal(signal.SIGTERM)
		self.wait_for(lambda: self.leader().get("kind") == liveness.WORKER, 20, "the candidate leads again")

	def test_the_setting_off_starts_no_candidate(self):
		worker = self.worker(env={**os.environ, worker_candidate.ENV: "0"})
		self.wait_for(lambda: self.worker_heartbeat(worker), 60, "the worker runs")
		time.sleep(3)
		self.assertEqual(self.candidates(), [])

	def worker_heartbeat(self, worker: subprocess.Popen) -> bool:
		"""rq's own record of the worker: it is up and would have started its candidate by now."""
		return any(str(worker.pid) == (pid or b"").decode() for pid in self.rq_worker_pids())

	def rq_worker_pids(self) -> list:
		keys = self.redis.smembers("rq:workers")
		return [self.redis.hget(key, "pid") for key in keys]


class TestFrappesOwnJobs(WorkerCase):
	"""#29's rule with candidates only: Frappe's tick stands back for the site while, and only while, a live
	acknowledgement of a scheduler of this bench exists; workers killed, stopped or started never leave the site's
	Scheduled Job Types to nobody."""

	def setUp(self):
		super().setUp()
		# BTU fires a site's job types only where Frappe's scheduler would (System Settings' Enable Scheduler).
		self.enable_scheduler = frappe.db.get_single_value("System Settings", "enable_scheduler")
		frappe.db.set_single_value("System Settings", "enable_scheduler", 1)
		frappe.db.set_single_value("BTU Configuration", scheduled_job_types.SWITCH, 1)
		# What is counted is the acknowledgement, not runs: nothing is left queued for the next test to drain (every
		# due job type fires at once when switched on, and v16's workers tick Frappe's own scheduler too).
		frappe.db.set_value("BTU Task Schedule", self.schedule, "enabled", 0)
		frappe.db.commit()
		stop_scheduled_job_types(self)

	def tearDown(self):
		super().tearDown()
		frappe.db.set_single_value("BTU Configuration", scheduled_job_types.SWITCH, 0)
		frappe.db.set_single_value("System Settings", "enable_scheduler", self.enable_scheduler or 0)
		frappe.db.commit()

	def ack(self) -> str | None:
		"""The site's acknowledgement: the lease token of the leader that wrote it."""
		value = self.redis.get(bench_keys().frappe_jobs_ack_key(get_bench_id(), frappe.local.site))
		return value.decode() if value else None

	def test_the_leading_candidate_acknowledges_and_none_outlives_the_workers(self):
		self.assertFalse(scheduler_link.fires_frappe_jobs())
		first, second = self.worker(), self.worker()
		self.wait_for(lambda: len(self.candidates()) == 2, 60, "both workers' candidates")
		token = self.wait_for(self.ack, 30, "the leading candidate acknowledges the site")
		self.assertTrue(scheduler_link.fires_frappe_jobs())
		leading = first if self.leader().get("worker_pid") == first.pid else second
		other = second if leading is first else first
		leading.kill()  # kill -9: its candidate drops the acknowledgement and hands the lease over
		self.wait_for(lambda: self.leader().get("worker_pid") == other.pid, 15, "the other worker's candidate leads")
		self.wait_for(lambda: self.ack() not in (None, token), 15, "the new leader's own acknowledgement")
		other.send_signal(signal.SIGTERM)  # the last worker stopped: Frappe's next tick fires the site's jobs
		other.wait(patient(30))
		self.wait_for(lambda: self.ack() is None, 5, "no acknowledgement once no worker runs")
		self.assertFalse(scheduler_link.fires_frappe_jobs())
