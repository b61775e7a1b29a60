import json
import threading
import time
import uuid
from datetime import datetime

import frappe
from rq.timeouts import JobTimeoutException

from btu.btu_core.runs.capture import OUTPUT_CAP_CHARS
from btu.btu_core.runs.slot_claim import lock_key
from btu.btu_core.runs.task_run import TaskRun, run_in_this_process
from btu.btu_core.task_runner import run_scheduled_task
from btu.btu_core.tests.utils import delete_committed, make_schedule, make_task, other_connection

try:
	from frappe.tests import IntegrationTestCase
except ImportError:
	from frappe.tests.utils import FrappeTestCase as IntegrationTestCase


class TestTaskRunner(IntegrationTestCase):
	"""The runner commits (that is its job), so each test removes what it made."""

	def setUp(self):
		self.tasks = []

	def tearDown(self):
		for task in self.tasks:
			delete_committed(task)

	def task(self, function="say_hello", **values):
		task = make_task(function, **values)
		self.tasks.append(task.name)
		return task

	def test_success_captures_stdout_stderr_logging_and_result(self):
		task = self.task(arguments='{"name": "Ada"}')
		log = run_in_this_process(task.name)
		self.assertEqual(log.status, "Succeeded")
		self.assertEqual(log.stdout, "hello Ada!\n")
		self.assertEqual(log.stderr, "warning for Ada\n")
		self.assertIn("INFO btu.sample: greeted Ada", log.logging_output)
		self.assertEqual(json.loads(log.result_message), {"greeted": "Ada"})
		self.assertEqual(log.site, frappe.local.site)
		self.assertTrue(log.worker)
		self.assertGreaterEqual(log.execution_time, 0)
		self.assertIsNotNone(frappe.db.get_value("BTU Task", task.name, "last_runtime"))
		self.assertEqual(frappe.db.count("BTU Task Log", {"task": task.name}), 1)

	def test_schedule_overrides_merge_over_task_arguments(self):
		task = self.task(arguments='{"name": "Ada", "punctuation": "?"}')
		schedule = make_schedule(task.name, argument_overrides='{"name": "Grace"}')
		log = TaskRun(task.name, schedule=schedule.name).execute()
		self.assertEqual(log.stdout.splitlines()[0], "hello Grace?")
		self.assertEqual(log.schedule, schedule.name)

	def test_failure_rolls_back_the_tasks_writes_and_reraises(self):
		marker = f"btu-rollback-{uuid.uuid4().hex}"
		task = self.task("insert_then_fail", arguments=json.dumps({"marker": marker}))
		with self.assertRaises(RuntimeError):
			TaskRun(task.name).execute()
		self.assertFalse(frappe.db.exists("ToDo", {"description": marker}), "the failed task's insert survived")
		log = frappe.get_last_doc("BTU Task Log", filters={"task": task.name})
		self.assertEqual(log.status, "Failed")
		self.assertIn("RuntimeError: failing after inserting", log.traceback)
		self.assertIn("insert_then_fail", log.traceback)
		self.assertEqual(log.stdout, f"inserted {marker}\n")
		self.assertIn("RuntimeError", log.result_message)
		self.assertEqual(frappe.db.count("BTU Task Log", {"task": task.name}), 1)

	def test_max_duration_times_out(self):
		task = self.task("sleep_for", arguments='{"seconds": 5}', max_task_duration=1)
		started = datetime.now()
		with self.assertRaises(JobTimeoutException):
			TaskRun(task.name).execute()
		self.assertLess((datetime.now() - started).total_seconds(), 4)
		log = frappe.get_last_doc("BTU Task Log", filters={"task": task.name})
		self.assertEqual(log.status, "Timed Out")
		self.assertEqual(log.stdout, "going to sleep\n")
		self.assertIn("JobTimeoutException", log.traceback)

	def test_scheduled_run_records_slot_and_runs_a_slot_once(self):
		task = self.task()
		schedule = make_schedule(task.name)
		slot = "2026-11-22T02:30:00Z"
		name = run_scheduled_task(
			task.name, schedule.name, slot, enqueued_at="2026-11-22T02:30:00.004Z", fire_lag_ms=4.2
		)
		log = frappe.get_doc("BTU Task Log", name)
		self.assertEqual(log.slot_utc, slot)
		self.assertEqual(log.fire_lag_ms, 4.2)
		expected_slot = frappe.utils.convert_utc_to_system_timezone(datetime(2026, 11, 22, 2, 30)).replace(tzinfo=None)
		self.assertEqual(frappe.utils.get_datetime(log.slot), expected_slot)
		self.assertIsNotNone(log.date_time_enqueued)
		# The same slot delivered again (a duplicate job) does not run again.
		self.assertEqual(run_scheduled_task(task.name, schedule.name, slot), name)
		self.assertEqual(frappe.db.count("BTU Task Log", {"task": task.name}), 1)

	def test_a_slot_with_a_log_of_any_status_is_never_run_again(self):
		# A run would turn any of these Logs Failed (or add a sixth).
		task = self.task("insert_then_fail", arguments=json.dumps({"marker": f"btu-rerun-{uuid.uuid4().hex}"}))
		schedule = make_schedule(task.name)
		for minute, status in enumerate(("Started", "Succeeded", "Failed", "Timed Out", "Skipped")):
			slot = f"2026-11-22T03:{minute:02d}:00Z"
			earlier = self.log_for_slot(task.name, schedule.name, slot, status)
			self.assertEqual(run_scheduled_task(task.name, schedule.name, slot), earlier, status)
			self.assertEqual(frappe.db.get_value("BTU Task Log", earlier, "status"), status)
		self.assertEqual(
			frappe.db.count("BTU Task Log", {"task": task.name}), 5, "a delivery ran beside its slot's Log"
		)

	def test_a_delivery_waits_for_the_slots_lock_and_then_finds_the_log_committed_under_it(self):
		"""The race a failover makes: two deliveries of one slot at once. The other one holds the lock, commits its Log,
		lets go."""
		task = self.task()
		schedule = make_schedule(task.name)
		slot = "2026-11-22T04:00:00Z"
		frappe.db.commit()
		other = other_connection(self)
		key = lock_key(frappe.conf.db_name, schedule.name, slot)
		with other.cursor() as cur:
			cur.execute("select get_lock(%s, 10)", (key,))
			self.assertEqual(cur.fetchone()[0], 1)
		name = f"other-{uuid.uuid4().hex[:10]}"

		def commit_then_release():
			time.sleep(1)
			with other.cursor() as cur:
				cur.execute(
					"insert into `tabBTU Task Log` (name, creation, modified, owner, modified_by, docstatus, task, "
					"schedule, slot_utc, status) "
					"values (%s, now(6), now(6), 'Administrator', 'Administrator', 0, %s, %s, %s, 'Started')",
					(name, task.name, schedule.name, slot),
				)
				other.commit()
				cur.execute("select release_lock(%s)", (key,))

		holder = threading.Thread(target=commit_then_release)
		started = time.monotonic()
		holder.start()
		self.assertEqual(run_scheduled_task(task.name, schedule.name, slot), name)
		holder.join()
		other.close()
		self.assertGreaterEqual(time.monotonic() - started, 0.9, "the delivery did not wait for the slot's lock")
		self.assertEqual(frappe.db.count("BTU Task Log", {"task": task.name}), 1)

	def log_for_slot(self, task: str, schedule: str, slot: str, status: str) -> str:
		log = frappe.get_doc(
			{
				"doctype": "BTU Task Log",
				"task": task,
				"schedule": schedule,
				"slot_utc": slot,
				"status": status,
				"date_time_started": frappe.utils.now_datetime(),
			}
		).insert(ignore_permissions=True)
		frappe.db.commit()
		return log.name

	def test_bad_slot_is_refused_with_the_expected_format(self):
		task = self.task()
		with self.assertRaises(ValueError) as caught:
			run_scheduled_task(task.name, None, "tomorrow")
		self.assertIn("2026-11-22T02:33:00Z", str(caught.exception))

	def test_missing_schedule_is_logged_as_skipped(self):
		task = self.task()
		name = run_scheduled_task(task.name, "TS-999999", "2026-11-22T02:30:00Z")
		log = frappe.get_doc("BTU Task Log", name)
		self.assertEqual(log.status, "Skipped")
		self.assertIn("TS-999999", log.result_message)

	def test_overlap_skip_while_a_run_is_in_progress(self):
		task = self.task()
		schedule = make_schedule(task.name, overlap_policy="skip")
		frappe.get_doc(
			{
				"doctype": "BTU Task Log",
				"task": task.name,
				"schedule": schedule.name,
				"status": "Started",
				"date_time_started": frappe.utils.now_datetime(),
			}
		).insert(ignore_permissions=True)
		name = run_scheduled_task(task.name, schedule.name, "2026-11-22T02:31:00Z")
		self.assertEqual(frappe.db.get_value("BTU Task Log", name, "status"), "Skipped")

	def test_output_is_capped_with_a_note(self):
		task = self.task("shout", arguments=json.dumps({"size": OUTPUT_CAP_CHARS + 10}))
		log = run_in_this_process(task.name)
		self.assertEqual(log.status, "Succeeded")
		self.assertTrue(log.stdout.startswith("x" * 1000))
		self.assertIn("10 more were dropped", log.stdout)

	def test_failure_mail_is_queued_for_recipients(self):
		marker = f"btu-mail-{uuid.uuid4().hex}"
		task = self.task(
			"insert_then_fail",
			arguments=json.dumps({"marker": marker}),
			email_recipients=[{"email_address": "oncall@example.com", "email_on_error": 1}],
		)
		log = run_in_this_process(task.name)
		self.assertEqual(log.status, "Failed")
		queued = frappe.get_all(
			"Email Queue", filters={"reference_doctype": "BTU Task Log", "reference_name": log.name}, pluck="name"
		)
		notes = [line for line in (log.logging_output or "").splitlines() if "could not be queued" in line]
		# Queued, or (a site without outgoing mail) the reason is on the log; the run is unaffected.
		self.assertTrue(queued or notes, log.logging_output)
		frappe.db.delete("Email Queue", {"reference_doctype": "BTU Task Log", "reference_name": log.name})
		frappe.db.commit()
