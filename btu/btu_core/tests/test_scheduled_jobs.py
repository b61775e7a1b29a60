"""Frappe's Scheduled Job Types fired by BTU, on a real Frappe site: BTU's run of a slot, Frappe's tick held back while
BTU takes a job type (only for a live acknowledgement of this bench's scheduler: `Keys.frappe_jobs_ack_key`), and
the claim that makes a slot run once when both reach it.

The scheduler's part (which rows become states, at which moments) is tier 1 (tests/engine/test_scheduled_jobs.py);
both processes together are end to end (test_end_to_end.py). Here a BTU fire is what the scheduler's job calls:
run_scheduled_task("frappe-job:<name>", "frappe-job:<name>", slot, kind="frappe-job").
"""

from __future__ import annotations

import json
import time
import uuid
from datetime import datetime, timedelta, timezone

import frappe
from frappe.utils import get_bench_id
from frappe.utils.background_jobs import create_job_id, get_redis_conn
from redis.exceptions import RedisError
from rq.job import Job

from btu.btu_core.runs import frappe_jobs
from btu.btu_core.scheduler_link import bench_keys
from btu.btu_core.schedules import scheduled_job_types
from btu.btu_core.task_runner import run_scheduled_task
from btu.btu_core.tests.sample_tasks import FRAPPE_JOB_CALLS
from btu.btu_core.tests.utils import site_config
from btu.shared import protocol
from btu.shared import scheduled_jobs as fj
from btu.shared.instants import slot_text
from btu.shared.run_kind import RunKey, RunKind

try:
	from frappe.tests import IntegrationTestCase
except ImportError:
	from frappe.tests.utils import FrappeTestCase as IntegrationTestCase

METHOD = "btu.btu_core.tests.sample_tasks.note_frappe_job"
DOCTYPE = "Scheduled Job Type"


class TestFrappeJobs(IntegrationTestCase):
	def setUp(self):
		frappe.set_user("Administrator")
		frappe.db.delete(DOCTYPE, {"method": METHOD})
		self.job = frappe.get_doc(
			{"doctype": DOCTYPE, "method": METHOD, "frequency": "Cron", "cron_format": "*/5 * * * *", "create_log": 1}
		).insert()
		# Last run 7 minutes ago: the slot between is due.
		self.last = frappe.utils.now_datetime() - timedelta(minutes=7)
		frappe.db.set_value(DOCTYPE, self.job.name, "last_execution", self.last, update_modified=False)
		self.job.reload()
		self.slot = frappe_jobs.due_slot(self.job)
		frappe.cache().delete_value(FRAPPE_JOB_CALLS)
		frappe.db.set_single_value("BTU Configuration", scheduled_job_types.SWITCH, 0)
		frappe.db.commit()
		self.process = None
		self.queued = []
		self.acks = []

	def tearDown(self):
		frappe.db.rollback()
		frappe.cache().delete(frappe.cache().make_key(fj.claim_key(self.job.name, self.slot)))
		frappe.cache().delete_value(FRAPPE_JOB_CALLS)
		frappe.db.delete("Scheduled Job Log", {"scheduled_job_type": self.job.name})
		frappe.db.delete(DOCTYPE, {"method": METHOD})
		frappe.db.set_single_value("BTU Configuration", scheduled_job_types.SWITCH, 0)
		frappe.db.commit()
		if self.process:
			get_redis_conn().zrem(bench_keys().processes, self.process)
			get_redis_conn().delete(bench_keys().process_key(self.process))
		for key in self.acks:
			get_redis_conn().delete(key)
		for job in frappe.get_all(DOCTYPE, pluck="name", filters={"method": METHOD}):
			frappe.delete_doc(DOCTYPE, job, force=True)
		for job_id in self.queued:
			try:
				Job.fetch(job_id, connection=get_redis_conn()).delete()
			except Exception:
				pass

	def calls(self) -> int:
		return frappe.cache().llen(FRAPPE_JOB_CALLS)

	def fire(self, slot: datetime | None = None):
		state = RunKey(RunKind.FRAPPE_JOB, self.job.name).format()
		return run_scheduled_task(state, state, slot_text(slot or self.slot), kind=RunKind.FRAPPE_JOB.value)

	def scheduler_alive(self):
		"""A BTU scheduler's heartbeat as the scheduler writes it, so liveness finds one alive."""
		self.process = f"test-{uuid.uuid4().hex[:8]}"
		conn = get_redis_conn()
		conn.set(
			bench_keys().process_key(self.process),
			json.dumps({"id": self.process, "heartbeat_at": datetime.now(timezone.utc).isoformat()}),
			ex=60,
		)
		conn.zadd(bench_keys().processes, {self.process: datetime.now(timezone.utc).timestamp()})

	def acknowledge(self, bench_id: str | None = None, ttl_ms: int = 60_000) -> None:
		"""A leader's acknowledgement that it fires this site's job types, as the scheduler writes it (of this bench
		unless `bench_id` names another)."""
		key = bench_keys().frappe_jobs_ack_key(bench_id or get_bench_id(), frappe.local.site)
		get_redis_conn().set(key, "1|test-leader", px=ttl_ms)
		self.acks.append(key)

	def frappe_tick(self) -> bool:
		"""What Frappe's scheduler does with the row on a tick: get_doc from the row's values, then enqueue()."""
		row = frappe.get_all(DOCTYPE, filters={"name": self.job.name}, fields="*")[0]
		enqueued = frappe.get_doc(doctype=DOCTYPE, **row).enqueue()
		if enqueued:
			self.queued.append(create_job_id(self.job.rq_job_id))
		return enqueued

	def test_the_override_is_frappes_controller_for_every_load(self):
		self.assertIsInstance(frappe.get_doc(DOCTYPE, self.job.name), scheduled_job_types.ScheduledJobType)
		row = frappe.get_all(DOCTYPE, filters={"name": self.job.name}, fields="*")[0]
		self.assertIsInstance(
			frappe.get_doc(doctype=DOCTYPE, **row), scheduled_job_types.ScheduledJobType
		)  # as Frappe's tick loads it

	def test_a_btu_fire_runs_the_job_type_once_with_its_scheduled_job_log(self):
		self.assertEqual(self.slot.minute % 5, 0)
		self.fire()
		self.assertEqual(self.calls(), 1)
		logs = frappe.get_all("Scheduled Job Log", filters={"scheduled_job_type": self.job.name}, pluck="status")
		self.assertEqual(logs, ["Complete"])
		last = frappe_jobs.as_utc(frappe.db.get_value(DOCTYPE, self.job.name, "last_execution"))
		self.assertGreaterEqual(last, self.slot)
		# A second delivery of the same job (a failover redelivered it) runs nothing.
		self.fire()
		self.assertEqual(self.calls(), 1)
		# Frappe's tick, reading the row before that run, finds it not due: the slot ran.
		self.assertFalse(self.frappe_tick())

	def test_frappes_tick_first_then_btus_fire_of_the_same_slot_runs_nothing(self):
		self.assertTrue(self.frappe_tick(), "switched off: Frappe's scheduler enqueues the due job type")
		self.fire()
		self.assertEqual(self.calls(), 0, "Frappe's scheduler claimed the slot; its own job runs it")

	def test_btus_claim_first_holds_frappes_tick_back_until_its_run(self):
		self.assertTrue(frappe_jobs.claim(self.job.name, self.slot, fj.BTU))
		self.assertFalse(self.frappe_tick(), "BTU claimed the slot (its job not yet run)")
		self.assertFalse(frappe_jobs.claim(self.job.name, self.slot, fj.FRAPPE))
		self.fire()
		self.assertEqual(self.calls(), 1)

	def test_switched_on_frappe_leaves_it_to_a_live_ack_of_its_own_benchs_scheduler(self):
		frappe.db.set_single_value("BTU Configuration", scheduled_job_types.SWITCH, 1)
		self.acknowledge()
		self.assertTrue(scheduled_job_types.btu_takes(self.job))
		self.assertFalse(self.frappe_tick())
		# A manual Execute is never held back.
		self.assertTrue(frappe.get_doc(DOCTYPE, self.job.name).enqueue(force=True))
		Job.fetch(create_job_id(self.job.rq_job_id), connection=get_redis_conn()).delete()

	def test_a_live_scheduler_without_an_ack_leaves_it_to_frappe(self):
		"""Alive but not firing this site's job types (executor rq, BTU disabled, the site's database unreachable for
		it, a standby with no leader): Frappe's scheduler fires them."""
		frappe.db.set_single_value("BTU Configuration", scheduled_job_types.SWITCH, 1)
		self.scheduler_alive()
		self.assertFalse(scheduled_job_types.btu_takes(self.job))
		self.assertTrue(self.frappe_tick())

	def test_an_ack_of_another_bench_leaves_it_to_frappe(self):
		"""Two benches on one Redis with sites of the same name: each stands back only for its own bench's scheduler."""
		frappe.db.set_single_value("BTU Configuration", scheduled_job_types.SWITCH, 1)
		self.acknowledge(bench_id=f"{get_bench_id()}-other")
		self.assertTrue(self.frappe_tick())

	def test_an_expired_ack_leaves_it_to_frappe(self):
		"""The scheduler died or was cut off: its acknowledgement expires, and Frappe's next tick fires."""
		frappe.db.set_single_value("BTU Configuration", scheduled_job_types.SWITCH, 1)
		self.acknowledge(ttl_ms=100)
		time.sleep(0.3)
		self.assertTrue(self.frappe_tick())

	def test_switched_off_frappe_fires_whatever_the_ack_says(self):
		self.acknowledge()
		self.assertTrue(self.frappe_tick())

	def test_redis_refusing_the_ack_read_leaves_it_to_frappe(self):
		"""An ACL user without BTU's grant (NOPERM on btu:*) still queues Frappe's jobs: Frappe's tick must fire
		them."""
		frappe.db.set_single_value("BTU Configuration", scheduled_job_types.SWITCH, 1)
		self.acknowledge()
		user, password = f"btu-test-{uuid.uuid4().hex[:8]}", uuid.uuid4().hex
		get_redis_conn().execute_command("ACL", "SETUSER", user, "on", f">{password}", "~rq:*", "+@all", "-@admin")
		try:
			with site_config(use_rq_auth=1, rq_username=user, rq_password=password):
				with self.assertRaises(RedisError):
					get_redis_conn().exists(self.acks[0])
				self.assertFalse(scheduled_job_types.btu_takes(self.job))
				self.assertTrue(self.frappe_tick())
		finally:
			get_redis_conn().execute_command("ACL", "DELUSER", user)

	def test_the_queue_redis_not_answering_leaves_it_to_frappe(self):
		frappe.db.set_single_value("BTU Configuration", scheduled_job_types.SWITCH, 1)
		self.acknowledge()
		with site_config(redis_queue="redis://127.0.0.1:1"):
			self.assertFalse(scheduled_job_types.btu_takes(self.job))

	def test_btus_watchdog_and_crons_btu_reads_otherwise_stay_with_frappe(self):
		frappe.db.set_single_value("BTU Configuration", scheduled_job_types.SWITCH, 1)
		self.acknowledge()
		watchdog = frappe.get_doc(DOCTYPE, {"method": "btu.btu_core.alerts.watchdog.check"})
		self.assertFalse(scheduled_job_types.btu_takes(watchdog))
		self.job.cron_format = "0 */5 * * * *"  # croniter's seconds-last form
		self.assertFalse(scheduled_job_types.btu_takes(self.job))

	def test_stopped_or_deleted_job_types_are_not_run_by_a_late_fire(self):
		frappe.db.set_value(DOCTYPE, self.job.name, "stopped", 1)
		frappe.db.commit()
		self.fire()
		self.assertEqual(self.calls(), 0)
		frappe.delete_doc(DOCTYPE, self.job.name, force=True)
		frappe.db.commit()
		self.fire()
		self.assertEqual(self.calls(), 0)

	def test_a_fire_for_a_slot_before_the_last_run_runs_nothing(self):
		self.fire(self.slot - timedelta(minutes=5))
		self.assertEqual(self.calls(), 0)
		self.fire(self.slot)
		self.assertEqual(self.calls(), 1)
