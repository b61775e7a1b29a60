"""End to end in the real bench: the BTU scheduler fires a 2-second schedule into
this site's RQ queue, `bench worker --burst` runs the jobs, and every run leaves
its Log with the right slot and the captured output."""

import json
import os
import re
import signal
import socket
import subprocess
import sys
import time
from datetime import datetime, timedelta, timezone
from pathlib import Path

import frappe
from frappe.utils import get_bench_path
from frappe.utils.background_jobs import create_job_id, get_queue

import btu
from btu.btu_core import api, scheduler_link
from btu.btu_core.scheduler_link import bench_keys
from btu.btu_core.schedules import declared_schedules
from btu.btu_core.schedules.hook_entries import HOOK
from btu.btu_core.sealed import store
from btu.btu_core.tests.utils import (
	SAMPLES,
	delete_committed,
	make_task,
	patient,
	stop_processes,
	stop_scheduled_job_types,
)
from btu.scheduler_daemon.commands import SUBCOMMANDS
from btu.scheduler_daemon.leading import worker_candidate
from btu.scheduler_daemon.leading.engine import HEARTBEAT_SECONDS
from btu.scheduler_daemon.operations.config import Config
from btu.scheduler_daemon.store import jobs
from btu.shared import liveness, protocol
from btu.shared.instants import parse_utc_iso

try:
	from frappe.tests import IntegrationTestCase
except ImportError:
	from frappe.tests.utils import FrappeTestCase as IntegrationTestCase

QUEUE = "short"
EVERY_SECS = 2
RUN_FOR_SECS = 9
STATUS_REFRESH_SECS = 10  # btu_configuration.js: BTU_STATUS_REFRESH_SECS
STARTUP_SECS = 30
# The declared schedule's Run Limit: fires enough to see one run, few enough for a burst worker to drain them.
DECLARED_RUNS = 2
# A Log the long-running worker has ended: one it is still running reads Started.
ENDED = {"status": ("!=", "Started")}


class EndToEndBase(IntegrationTestCase):
	"""A BTU scheduler process and burst workers on this bench."""

	def setUp(self):
		if "run" not in SUBCOMMANDS:
			self.skipTest("btu-scheduler has no `run` subcommand in this tree yet")
		self.bench = Path(get_bench_path())
		self.python = str(self.bench / "env" / "bin" / "python")
		self.output_dir = self.bench / "logs"
		self.scheduler = None
		self.worker = None
		self.processes = []
		self.task = None

	def tearDown(self):
		stop_processes([*self.processes, self.scheduler])
		if self.task:
			delete_committed(self.task)

	def start_scheduler(self):
		log = open(self.output_dir / "btu-e2e-scheduler.log", "w")
		self.scheduler = subprocess.Popen(
			[self.python, "-m", "btu.scheduler_daemon", "run", "--bench", str(self.bench), "--executor", "frappe"],
			cwd=self.bench,
			stdout=log,
			stderr=subprocess.STDOUT,
		)
		deadline = time.monotonic() + patient(STARTUP_SECS)
		while time.monotonic() < deadline:
			if self.scheduler.poll() is not None:
				self.fail(f"btu-scheduler run exited with {self.scheduler.returncode}: {self.scheduler_output()}")
			if scheduler_link.send(protocol.PING).ok and self.heartbeat_is_ours():
				return
			time.sleep(0.05)
		self.fail(f"btu-scheduler did not answer a ping within {patient(STARTUP_SECS)} s: {self.scheduler_output()}")

	def heartbeat_is_ours(self) -> bool:
		"""The process list holds this test's scheduler: a ping alone may be answered by another one on the bench's
		Redis."""
		here = socket.gethostname()
		return any(
			p.get("pid") == self.scheduler.pid and p.get("host") == here
			for p in liveness.processes(scheduler_link.queue_redis(), bench_keys())
		)

	def scheduler_output(self) -> str:
		path = self.output_dir / "btu-e2e-scheduler.log"
		return path.read_text()[-4000:] if path.exists() else ""

	def run_worker_burst(self):
		done = subprocess.run(
			[self.python, "-m", "frappe.utils.bench_helper", "frappe", "worker", "--burst", "--queue", QUEUE],
			cwd=self.bench / "sites",
			capture_output=True,
			text=True,
			timeout=patient(300),
			env={**os.environ, "PYTHONUNBUFFERED": "1"},
		)
		self.assertEqual(done.returncode, 0, done.stderr[-4000:])

	def spawn(self, name: str, *args: str, cwd: Path) -> subprocess.Popen:
		log = open(self.output_dir / f"btu-e2e-{name}.log", "w")
		# Its worker starts no scheduler candidate: this test's own scheduler, and its stopping, are what it measures.
		env = {**os.environ, worker_candidate.ENV: "0"}
		process = subprocess.Popen([self.python, *args], cwd=cwd, stdout=log, stderr=subprocess.STDOUT, env=env)
		self.processes.append(process)
		return process

	def start_worker(self) -> None:
		"""A long-running worker, as a bench runs it (a burst worker's own start would be counted as lateness); what
		earlier tests left on the queues runs first."""
		self.worker = self.spawn(
			"worker",
			"-m",
			"frappe.utils.bench_helper",
			"frappe",
			"worker",
			"--queue",
			"default,short",
			cwd=self.bench / "sites",
		)
		self.wait_until(
			time.time() + patient(120), done=lambda: not any(len(get_queue(name)) for name in ("default", "short"))
		)

	def wait_until(self, moment: float, done=lambda: False) -> None:
		"""Until `moment`, or until `done()` says what was awaited is seen (the worker runs the jobs meanwhile)."""
		while time.time() < moment and not done():
			self.assertIsNone(self.worker.poll(), "the bench worker exited")
			time.sleep(0.5)


def logs_of(schedule: str) -> list:
	"""The schedule's Task Logs, slot by slot, as the worker committed them."""
	frappe.db.rollback()  # a fresh snapshot: the worker's writes
	logs = frappe.get_all(
		"BTU Task Log",
		filters={"schedule": schedule},
		fields=["name", "status", "slot_utc", "rq_job_id", "fire_lag_ms", "site"],
		order_by="slot_utc asc",
	)
	output = store.read("BTU Task Log", [log.name for log in logs])
	for log in logs:
		log.update({field: output.get(log.name, {}).get(field) for field in ("stdout", "stderr", "logging_output")})
	return logs


class TestEndToEnd(EndToEndBase):
	def watch_status_panel(self, until: datetime) -> list[float]:
		"""The leader's heartbeat age as the Desk's status panel reads it, once a second until `until`."""
		ages = []
		while datetime.now(timezone.utc) < until:
			ages.append(api.status()["heartbeat_age_secs"])
			time.sleep(1)
		return ages

	def check_log(self, log, schedule: str) -> None:
		self.assertEqual(log.status, "Succeeded", log)
		output = store.read("BTU Task Log", [log.name]).get(log.name, {})  # sealed: no list reads them
		self.assertEqual(output.get("stdout"), "hello end to end!\n")
		self.assertEqual(output.get("stderr"), "warning for end to end\n")
		self.assertIn("greeted end to end", output.get("logging_output"))
		self.assertEqual(log.site, frappe.local.site)
		# The id Frappe's installed version makes of BTU's key ("<site>::" on v15, "<site>||" on v16),
		# so Frappe's get_job and RQ Job list find the job.
		slot = datetime.strptime(log.slot_utc, "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=timezone.utc)
		self.assertEqual(log.rq_job_id, create_job_id(f"btu|{schedule}|{jobs.compact_slot(slot)}"))
		self.assertEqual(jobs.parse_job_id(log.rq_job_id), (frappe.local.site, schedule, slot))
		self.assertIsNotNone(log.fire_lag_ms)

	def schedule_every_few_seconds(self, start: datetime):
		"""An enabled schedule of this test's Task every EVERY_SECS seconds from `start`, committed."""
		schedule = frappe.get_doc(
			{
				"doctype": "BTU Task Schedule",
				"task": self.task,
				"enabled": 1,
				"run_frequency": "Interval",
				"every": EVERY_SECS,
				"every_unit": "Seconds",
				"time_zone": "UTC",
				"start_time": start,  # an instant: stored on the system zone's clock
				"catch_up_policy": "skip",
			}
		).insert()
		frappe.db.commit()  # the scheduler reads committed rows; the RPC follows the commit
		return schedule

	def test_two_second_schedule_fires_runs_and_logs(self):
		self.start_scheduler()
		self.task = make_task(arguments='{"name": "end to end"}', queue_name=QUEUE).name
		start = (datetime.now(timezone.utc) + timedelta(seconds=4)).replace(microsecond=0)
		schedule = self.schedule_every_few_seconds(start)
		ages = self.watch_status_panel(until=start + timedelta(seconds=RUN_FOR_SECS))
		# The panel reads heartbeats live: a leader writes one every HEARTBEAT_SECONDS at its next lease renewal (a
		# third of the TTL), 6.7 s apart at most, so none it shows is older than its 10 s refresh (the published status
		# it read before could be 35 s old).
		self.assertLess(HEARTBEAT_SECONDS + Config().lease_ttl_secs / 3, STATUS_REFRESH_SECS)
		self.assertLessEqual(max(ages), STATUS_REFRESH_SECS, ages)
		[figures] = [p["metrics"] for p in api.status()["processes"] if p["role"] == "leader"]
		self.assertGreater(figures["fires"], 0, figures)
		schedule.reload()
		schedule.enabled = 0
		schedule.save()
		frappe.db.commit()
		time.sleep(1)  # a fire that was being written when the cancel arrived lands now
		self.run_worker_burst()

		logs = logs_of(schedule.name)
		self.assertGreaterEqual(len(logs), RUN_FOR_SECS // EVERY_SECS - 1, f"{logs}\n{self.scheduler_output()}")
		slots = [datetime.strptime(log.slot_utc, "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=timezone.utc) for log in logs]
		self.assertEqual(slots[0], start, "the first fire is the start_time slot")
		self.assertEqual(
			[(b - a).total_seconds() for a, b in zip(slots, slots[1:])],
			[float(EVERY_SECS)] * (len(slots) - 1),
			"slots are consecutive, one per 2 seconds, none twice",
		)
		for log in logs:
			self.check_log(log, schedule.name)
		lags = sorted(log.fire_lag_ms for log in logs)
		sys.stdout.write(
			f"\nend to end: {len(logs)} fires, {len(logs)} Task Logs Succeeded, "
			f"fire lag ms median {lags[len(lags) // 2]:.1f} max {lags[-1]:.1f}, job ids like {logs[0].rq_job_id}\n"
		)

	def wait_for(self, predicate, timeout: float, what: str):
		"""Until `predicate()` (on a fresh snapshot) holds, the queue's jobs run by a long-running worker: a burst
		worker per look pays Frappe's start-up each time (seconds on a loaded machine), once more per step of a retry
		or a chain."""
		if self.worker is None:
			self.start_worker()
		found = None

		def seen():
			nonlocal found
			frappe.db.rollback()
			found = predicate()
			return bool(found)

		self.wait_until(time.time() + patient(timeout), done=seen)
		if not found:
			self.fail(f"no {what} within {patient(timeout)} s\n{self.scheduler_output()}")
		return found

	def test_a_retry_and_a_chained_run_fire_through_the_scheduler(self):
		self.start_scheduler()
		child = make_task(arguments='{"name": "end to end"}', queue_name=QUEUE)
		marker = frappe.generate_hash(length=12)
		self.task = make_task(
			"flaky",
			arguments=json.dumps({"marker": marker, "failures": 1}),
			queue_name=QUEUE,
			max_attempts=3,
			retry_delay_secs=2,
			chained_tasks=[{"next_task": child.name, "on_outcome": "Success"}],
		).name
		self.addCleanup(delete_committed, child.name)
		run_at = (datetime.now(timezone.utc) + timedelta(seconds=3)).replace(microsecond=0)
		frappe.get_doc(
			{
				"doctype": "BTU Task Schedule",
				"task": self.task,
				"enabled": 1,
				"run_frequency": "Once",
				"time_zone": "UTC",
				"run_at": run_at,
			}
		).insert()
		frappe.db.commit()
		chained = self.wait_for(
			lambda: frappe.get_all("BTU Task Log", filters={"task": child.name, **ENDED}, fields=["*"]),
			60,
			"chained run",
		)
		attempts = frappe.get_all("BTU Task Log", filters={"task": self.task}, fields=["*"], order_by="attempt")
		self.assertEqual([(a.attempt, a.status) for a in attempts], [(1, "Failed"), (2, "Succeeded")], attempts)
		first, second = attempts
		self.assertEqual(
			(second.origin, second.first_attempt_log, second.slot_utc), ("Retry", first.name, first.slot_utc)
		)
		self.assertIsNotNone(second.fire_lag_ms, "the retry was fired by the scheduler")
		self.assertGreaterEqual(
			(second.date_time_started - first.date_time_ended).total_seconds(), 1.5, "it waited its 2 s delay"
		)
		[link] = chained
		self.assertEqual((link.parent_log, link.origin, link.status), (second.name, "Chain", "Succeeded"))
		self.assertEqual(
			frappe.db.count("BTU Run Request", {"task": ("in", [self.task, child.name]), "status": "Done"}), 2
		)
		sys.stdout.write(
			f"\nend to end: retry fire lag {second.fire_lag_ms:.1f} ms, "
			f"chained run fire lag {link.fire_lag_ms:.1f} ms\n"
		)

	def test_enqueue_at_runs_at_its_millisecond_once_and_a_cancelled_one_never(self):
		self.start_scheduler()
		marker = frappe.generate_hash(length=12)
		self.addCleanup(frappe.cache().delete_value, f"btu-test-calls:{marker}")
		at = (datetime.now(timezone.utc) + timedelta(seconds=3)).replace(microsecond=437_000)
		handle = btu.enqueue_at(
			"btu.btu_core.tests.sample_tasks.note_call", at, queue=QUEUE, marker=marker, value="kept"
		)
		withdrawn = btu.enqueue_at(
			"btu.btu_core.tests.sample_tasks.note_call", at, queue=QUEUE, marker=marker, value="cancelled"
		)
		logged = btu.enqueue_at(
			"btu.btu_core.tests.sample_tasks.note_call", at, queue=QUEUE, task_log=True, marker=marker, value="logged"
		)
		frappe.db.commit()  # the RPC follows the commit
		self.addCleanup(frappe.db.delete, "BTU Run Request", {"name": ("in", [handle, withdrawn, logged])})
		self.addCleanup(frappe.db.delete, "BTU Task Log", {"run_request": logged})
		self.assertTrue(btu.cancel(withdrawn))
		frappe.db.commit()
		for request in (handle, logged):
			self.wait_for(
				lambda request=request: (
					frappe.db.get_value("BTU Run Request", request, "status") == "Done"
					and "Succeeded" in (frappe.db.get_value("BTU Run Request", request, "note") or "")
				),
				60,
				"the enqueued run",
			)
		time.sleep(2)
		self.run_worker_burst()  # anything else the scheduler fired would run now
		calls = [
			c.decode() if isinstance(c, bytes) else c for c in frappe.cache().lrange(f"btu-test-calls:{marker}", 0, -1)
		]
		self.assertEqual(sorted(c.split()[1] for c in calls), ["kept", "logged"], calls)
		self.assertGreaterEqual(min(float(c.split()[0]) for c in calls), at.timestamp(), "not before its moment")
		frappe.db.rollback()
		[log] = frappe.get_all("BTU Task Log", filters={"run_request": logged}, fields=["*"])
		self.assertEqual(
			(log.status, log.method, log.origin, log.task),
			("Succeeded", "btu.btu_core.tests.sample_tasks.note_call", "Enqueue", None),
		)
		self.assertTrue(log.rq_job_id and log.worker, "run by a worker, from the scheduler's job")
		self.assertLess(log.fire_lag_ms, 1000)
		self.assertEqual(frappe.db.get_value("BTU Run Request", logged, "log"), log.name)
		self.assertEqual(frappe.db.get_value("BTU Run Request", withdrawn, "status"), "Cancelled")
		note = frappe.db.get_value("BTU Run Request", handle, "note")
		lag, start_lag = (float(note.split(f"{name} lag ")[1].split(" ms")[0]) for name in ("fire", "start"))
		self.assertLess(lag, 1000, note)
		self.assertGreaterEqual(start_lag, lag, note)
		sys.stdout.write(
			f"\nend to end: enqueue_at fire lag {lag:.1f} ms, start lag {start_lag:.1f} ms; with task_log, its Log "
			f"{log.name} lag {log.fire_lag_ms:.1f} ms\n"
		)

	def test_a_backfill_runs_its_slots_one_at_a_time_through_the_scheduler(self):
		self.start_scheduler()
		self.task = make_task(arguments='{"name": "end to end"}', queue_name=QUEUE).name
		schedule = frappe.get_doc(
			{
				"doctype": "BTU Task Schedule",
				"task": self.task,
				"enabled": 0,
				"run_frequency": "Hourly",
				"minute": 0,
				"time_zone": "UTC",
			}
		).insert()
		frappe.db.commit()
		top = datetime.now(timezone.utc).replace(minute=0, second=0, microsecond=0)
		result = api.backfill(
			schedule.name, (top - timedelta(hours=3)).isoformat(), (top - timedelta(hours=1)).isoformat()
		)
		frappe.db.commit()
		self.assertEqual(len(result["requested"]), 3)
		logs = self.wait_for(
			lambda: (
				(
					found := frappe.get_all(
						"BTU Task Log",
						filters={"schedule": schedule.name, **ENDED},
						fields=["*"],
						order_by="date_time_started",
					)
				)
				and len(found) == 3
				and found
			),
			60,
			"three backfilled runs",
		)
		self.assertEqual(
			[log.slot_utc for log in logs], sorted(log.slot_utc for log in logs), "one at a time, oldest first"
		)
		self.assertTrue(all(log.origin == "Backfill" and log.status == "Succeeded" for log in logs), logs)
		for before, after in zip(logs, logs[1:]):
			self.assertGreaterEqual(after.date_time_started, before.date_time_ended)

	def test_a_schedule_declared_in_hooks_fires_through_the_scheduler(self):
		self.start_scheduler()
		own = list(frappe.get_hooks(HOOK, app_name="btu"))
		# Each run takes longer than the period, as on a slow worker (no compiled bytecode): the queue is never empty
		# while the schedule fires, so a burst worker would never end. Run Limit (the admin's field on a declared row)
		# bounds the fires, and the burst ends after them whatever each run costs.
		entry = {
			"name": "e2e_declared", "function": f"{SAMPLES}.say_hello",
			"arguments": {"name": "end to end", "linger_secs": EVERY_SECS + 0.5},
			"queue": QUEUE, "every": EVERY_SECS, "every_unit": "Seconds", "catch_up_policy": "skip", "time_zone": "UTC",
		}  # fmt: skip
		declared_schedules.sync({"btu": [*own, entry]})
		task, schedule = frappe.db.get_value(
			"BTU Task Schedule", {"declared_by_app": "btu", "declared_key": "e2e_declared"}, ["task", "name"]
		)
		frappe.get_doc("BTU Task Schedule", schedule).update({"run_limit": DECLARED_RUNS}).save()
		frappe.db.commit()  # the RPC follows the commit
		self.addCleanup(self.undeclare, own)
		[log, *_] = self.wait_for(
			lambda: frappe.get_all("BTU Task Log", filters={"task": task, **ENDED}, fields=["*"], order_by="slot_utc"),
			60,
			"a declared schedule's run",
		)
		self.check_log(log, schedule)
		self.assertGreater(log.execution_time, EVERY_SECS, "a run slower than the period")
		sys.stdout.write(f"\nend to end: declared schedule fire lag {log.fire_lag_ms:.1f} ms\n")

	def undeclare(self, own: list) -> None:
		"""Stop the declared schedule, let the queue drain, then let the sync delete its rows (no Logs left to keep
		them)."""
		frappe.db.rollback()
		schedule = frappe.db.get_value(
			"BTU Task Schedule",
			{"declared_by_app": "btu", "declared_key": "e2e_declared"},
			["name", "task"],
			as_dict=True,
		)
		frappe.get_doc("BTU Task Schedule", schedule.name).update({"enabled": 0}).save()
		frappe.db.commit()
		time.sleep(1)  # a fire being written when the cancel arrived lands now
		self.run_worker_burst()
		frappe.db.delete("BTU Task Log", {"task": schedule.task})
		declared_schedules.sync({"btu": own})
		frappe.db.commit()
		self.assertFalse(frappe.db.exists("BTU Task", schedule.task))


class TestFrappeJobsEndToEnd(EndToEndBase):
	"""With "Fire Frappe's Scheduled Jobs" on, two BTU schedulers and Frappe's own scheduler process all running: a
	Scheduled Job Type every minute runs once per minute at its moment, with its Scheduled Job Log; switched off,
	Frappe's scheduler takes it back with no slot run twice."""

	METHOD = "btu.btu_core.tests.sample_tasks.note_frappe_job"
	ON_MINUTES = 2  # two consecutive minutes, each run once at its moment
	OFF_SECS = 150
	WATCH_SECS = 35  # after Frappe's first run, how long a second run of the same minute is watched for
	FIRED_WITHIN_MS = 1000  # from its minute to its job on the queue: the scheduler's part
	SWITCH_SECS = 10  # the scheduler takes the job types over within this of the switch (an RPC and a read)

	def setUp(self):
		super().setUp()
		from btu.btu_core.tests.sample_tasks import FRAPPE_JOB_CALLS

		self.calls_key = FRAPPE_JOB_CALLS
		stop_scheduled_job_types(self)  # only this job type is due when switched on: its runs queue behind no others
		frappe.db.delete("Scheduled Job Type", {"method": self.METHOD})
		self.job = frappe.get_doc(
			{
				"doctype": "Scheduled Job Type",
				"method": self.METHOD,
				"frequency": "Cron",
				"cron_format": "* * * * *",
				"create_log": 1,
			}
		).insert()
		frappe.db.set_value(
			"Scheduled Job Type", self.job.name, "last_execution", frappe.utils.now_datetime(), update_modified=False
		)
		self.enable_scheduler = frappe.db.get_single_value("System Settings", "enable_scheduler")
		frappe.db.set_single_value("System Settings", "enable_scheduler", 1)
		# An active site (Frappe's scheduler runs a dormant one's jobs once a day), and Frappe's tick every 10 s (v15's
		# default is 60 s, v16's 240 s): the hand-back is seen within seconds of the minute, and Frappe's scheduler
		# looks six times a minute for a job type BTU holds.
		frappe.get_doc({"doctype": "Activity Log", "subject": "btu end to end", "status": "Success"}).insert(
			ignore_permissions=True
		)
		from frappe.utils import scheduler as frappe_scheduler

		getattr(frappe_scheduler.schedule_jobs_based_on_activity, "clear_cache", lambda: None)()
		self.common_config = self.bench / "sites" / "common_site_config.json"
		self.common_text = self.common_config.read_text()
		self.common_config.write_text(
			json.dumps({**json.loads(self.common_text), "scheduler_tick_interval": 10}, indent=1)
		)
		frappe.cache().delete_value(self.calls_key)
		frappe.db.commit()

	def tearDown(self):
		super().tearDown()
		self.common_config.write_text(self.common_text)
		frappe.db.rollback()
		self.set_switch(0)
		frappe.db.set_single_value("System Settings", "enable_scheduler", self.enable_scheduler or 0)
		frappe.db.delete("Scheduled Job Log", {"scheduled_job_type": self.job.name})
		frappe.db.delete("Scheduled Job Type", {"method": self.METHOD})
		frappe.cache().delete_value(self.calls_key)
		frappe.db.commit()

	def set_switch(self, on: int) -> None:
		config = frappe.get_single("BTU Configuration")
		config.fire_frappe_jobs = on
		config.save(ignore_permissions=True)
		frappe.db.commit()  # the scheduler is told after commit

	def call_times(self) -> list[float]:
		return sorted(float(c) for c in frappe.cache().lrange(self.calls_key, 0, -1))

	def job_logs(self) -> list[str]:
		"""The statuses of the job type's finished Scheduled Job Logs."""
		frappe.db.rollback()  # a fresh snapshot: the worker commits them
		return frappe.get_all(
			"Scheduled Job Log",
			filters={"scheduled_job_type": self.job.name, "status": ("!=", "Start")},
			pluck="status",
		)

	def start_second_and_frappes_schedulers(self) -> None:
		"""A second BTU scheduler (a standby beside the first) and Frappe's own scheduler, as a bench runs them."""
		self.spawn(
			"scheduler-2",
			"-m",
			"btu.scheduler_daemon",
			"run",
			"--bench",
			str(self.bench),
			"--executor",
			"frappe",
			cwd=self.bench,
		)
		self.spawn(
			"frappe-scheduler", "-m", "frappe.utils.bench_helper", "frappe", "schedule", cwd=self.bench / "sites"
		)

	def fired_slots(self) -> list[tuple[str, str]]:
		"""(slot, lag_ms) of each fire of the job type that either BTU scheduler logged."""
		return re.findall(
			rf"schedule=frappe-job:{re.escape(self.job.name)} slot=(\S+) lag_ms=([\d.]+)",
			self.scheduler_output() + (self.output_dir / "btu-e2e-scheduler-2.log").read_text(),
		)

	def test_btu_fires_them_once_beside_frappes_scheduler_and_hands_them_back(self):
		self.start_scheduler()  # the first BTU scheduler (it answers the RPC the switch sends)
		self.start_worker()
		self.set_switch(1)
		started = time.time()
		# Frappe's scheduler starts once BTU has the job types: it must stand back from the first tick on.
		self.start_second_and_frappes_schedulers()
		# Counted from a minute the scheduler has had time to take; the switch's own minute may run too, once.
		first_minute = (int(started + self.SWITCH_SECS) // 60 + 1) * 60
		minutes = [first_minute + 60 * k for k in range(self.ON_MINUTES)]

		def counted() -> list[float]:
			return [call for call in self.call_times() if call >= first_minute]

		self.wait_until(
			minutes[-1] + 60,
			done=lambda: len(counted()) >= self.ON_MINUTES and len(self.job_logs()) >= len(self.call_times()),
		)
		calls, runs = counted(), self.call_times()
		# One run per minute, each within its minute: BTU fires it at the minute (below), and the worker, with no other
		# job type due, runs it next. A second run of the last minute would come after this; the hand-back's gaps below
		# catch it.
		self.assertEqual(len(calls), self.ON_MINUTES, (runs, minutes))
		for call, minute in zip(calls, minutes):
			self.assertTrue(minute <= call < minute + 60, (runs, minutes))
		# So no slot ran twice while BTU fired: each counted run is inside its own minute, and at most one ran before
		# them. (Not the gaps between runs: a run the worker took late on a loaded machine may sit seconds before the
		# next minute's.)
		self.assertLessEqual(
			len(runs) - len(calls), 1, f"only the switch's own minute runs before {first_minute}: {runs}"
		)
		self.assertEqual(self.job_logs(), ["Complete"] * len(runs))
		fired = self.fired_slots()
		self.assertEqual(len({slot for slot, _ in fired}), len(fired), f"a slot fired twice: {fired}")
		# The counted minutes' lags: the switch's own minute, when BTU takes the job types over seconds into it, is
		# fired late by design (a catch-up within the grace), not by a slow scheduler.
		lags = sorted(float(lag) for slot, lag in fired if parse_utc_iso(slot, "slot").timestamp() >= first_minute)
		self.assertTrue(all(lag < patient(self.FIRED_WITHIN_MS) for lag in lags), fired)
		after, off = self.handed_back(calls)
		sys.stdout.write(
			f"\nend to end: Scheduled Job Type fired by BTU {len(calls)} times, fire lag {lags}; "
			f"after hand-back Frappe ran it {len(after)} times, first {after[0] - off:.0f} s after the switch\n"
		)

	def handed_back(self, calls: list[float]) -> tuple[list[float], float]:
		"""Switched off: Frappe's scheduler takes the job type back at its first tick after a minute, and no minute's
		slot runs twice across the switch. Frappe's runs after BTU's last, and the moment of the switch."""
		self.set_switch(0)
		off = time.time()

		def handed_back_and_watched() -> bool:
			"""Frappe ran it, and long enough ago for a doubled slot (a second run close behind) to show."""
			first = next((c for c in self.call_times() if c > calls[-1]), None)
			return first is not None and time.time() > first + self.WATCH_SECS

		self.wait_until(off + self.OFF_SECS, done=handed_back_and_watched)
		after = [c for c in self.call_times() if c > calls[-1]]
		self.assertGreaterEqual(len(after), 1, "Frappe's scheduler ran it again after the hand-back")
		# One run a minute across the hand-back, told by the runs' minutes as above: not by the gap between two runs
		# (BTU's last run, 43 s into its minute behind the worker's queue, and Frappe's prompt one 4 s into the next are
		# two slots 20 s apart).
		handed = [calls[-1], *after]
		self.assertEqual(
			len({int(run // 60) for run in handed}),
			len(handed),
			f"a minute's slot ran twice around the hand-back: {handed}",
		)
		self.assertLess(after[0] - off, patient(90), "Frappe's scheduler took it back at its first tick after a minute")
		return after, off
