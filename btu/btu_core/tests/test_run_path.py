"""What a run loads before its function is called: a forked work-horse pays for each module on every run.

Each run starts in a fresh interpreter holding what `bench worker` holds before it forks (frappe, its background
jobs, rq), connected as a work-horse is: one Task for a slot through `run_scheduled_task`, one `enqueue_at` request
through `run_request`; the function notes the modules loaded when it is called. Alerts' HTTP and mail code,
Prometheus's library, Frappe's Document (and with it its Notification machinery), its query engine and defaults code,
the Scheduled Job Type controller and the schedule rules are for later steps or other runs: none may be loaded by then.
"""

import importlib.util
import json
import os
import subprocess
import sys
from datetime import datetime, timedelta, timezone
from pathlib import Path

import frappe

from btu.btu_core.insights import task_outcomes
from btu.btu_core.runs import run_rows
from btu.btu_core.tests import sample_tasks
from btu.btu_core.tests.utils import delete_committed, make_schedule, make_task, patient
from btu.shared.instants import FRAPPE_DEFAULT_ZONE, format_utc_iso

try:
	from frappe.tests import IntegrationTestCase
except ImportError:
	from frappe.tests.utils import FrappeTestCase as IntegrationTestCase

# Module (or package) -> what loads it, were it loaded before the call.
NOT_BEFORE_THE_CALL = {
	"btu.btu_core.alerts.webhook_post": "alerts' webhook POST (alerts.webhooks.post)",
	"smtplib": "mail sending (Frappe's Email Queue sends it, never the run)",
	"prometheus_client": "the metrics scrape (metrics.scrape, task_outcomes.families)",
	"frappe.model.document": "Frappe's Document: get_doc, and System Settings through get_system_timezone or "
	"now_datetime (instants.system_zone reads the zone as a row)",
	"frappe.email.doctype.notification.notification": "Document.insert/save (the Log's start must be a row)",
	"frappe.model.create_new": "Document defaults (the Log's start must be a row)",
	"frappe.database.query": "frappe.db.get_value/exists/set_value with filters (plain SQL before the call)",
	"frappe.utils.response": (
		"the RPC telling the scheduler a request is Done, and its realtime message (after the call)"
	),
	"frappe.core.doctype.scheduled_job_type.scheduled_job_type": (
		"Frappe's controller, overridden in btu_core.schedules.scheduled_job_types (Frappe job runs only)"
	),
	"btu.shared.schedule": "a schedule's rules (late-start alert and retries' next fire, after the call)",
	"croniter": "a schedule's rules, through btu.shared.schedule",
}

# Module -> what loads it, were it loaded by a run's end on a site where nothing listens to BTU Task Log.
NOT_BY_THE_END = {
	"frappe.model.document": (
		"Frappe's Document: the Log's end, the Task and Schedule read after the call (rows: run_rows)"
	),
	"frappe.email.doctype.notification.notification": "Document.save (the Log's end is a row where nothing listens)",
	"frappe.utils.response": "frappe.publish_realtime's JSON encoder (run_rows.publish tells the Desk)",
	"frappe.database.query": "frappe.db.get_value/exists/set_value with filters (plain SQL after the call too)",
	"btu.btu_core.alerts.webhook_post": "alerts' webhook POST (only when an alert is sent)",
	"prometheus_client": "the metrics scrape",
}

WORK_HORSE = """
import json, sys
import frappe, frappe.utils.background_jobs, rq  # what `bench worker` holds when it forks
before_fork = sorted(sys.modules)
frappe.init(site=sys.argv[1], sites_path=".")
frappe.connect()
frappe.set_user("Administrator")
frappe.local.job = frappe._dict()  # as execute_job sets it
from btu.btu_core.tests import sample_tasks
from btu.btu_core.task_runner import run_request, run_scheduled_task
if sys.argv[2] == "task":
	run_scheduled_task(*sys.argv[3:6])
else:
	run_request(sys.argv[3], None, None)
frappe.db.commit()
print(json.dumps([before_fork, *[sorted(modules) for modules in sample_tasks.MODULES_AT_CALL], sorted(sys.modules)]))
"""


def loaded(watched: dict[str, str], modules: list[str]) -> dict[str, str]:
	"""The `watched` modules (or packages) among `modules`, with why each must not be there."""
	return {
		name: why
		for name, why in watched.items()
		if any(module == name or module.startswith(name + ".") for module in modules)
	}


def run_loaded(watched: dict[str, str], before_fork: list[str], modules: list[str]) -> dict[str, str]:
	"""The `watched` modules the run itself loaded: one the worker held before it forked costs a run nothing (v16's
	`import frappe` alone loads frappe.model.document)."""
	held = set(before_fork)
	return loaded(watched, [module for module in modules if module not in held])


class TestRunPath(IntegrationTestCase):
	def setUp(self):
		self.task = make_task("note_modules").name
		self.schedule = make_schedule(self.task).name
		import btu

		self.request = btu.enqueue_at(
			"btu.btu_core.tests.sample_tasks.note_modules", datetime.now(timezone.utc) + timedelta(hours=1)
		)
		frappe.db.commit()

	def tearDown(self):
		delete_committed(self.task)
		frappe.db.delete("BTU Run Request", {"name": self.request})  # a request names no Task
		frappe.db.commit()

	def run_in_work_horse(self, *argv: str) -> tuple[list[str], list[str], list[str]]:
		"""The modules loaded before the fork, when the function was called, and when the run had ended."""
		done = subprocess.run(
			[sys.executable, "-c", WORK_HORSE, frappe.local.site, *argv],
			cwd=frappe.utils.get_bench_path() + "/sites",
			capture_output=True,
			text=True,
			timeout=120,
		)
		self.assertEqual(done.returncode, 0, done.stderr[-3000:])
		before_fork, at_call, at_end = json.loads(done.stdout.strip().splitlines()[-1])
		return before_fork, at_call, at_end

	def test_nothing_heavy_is_loaded_before_the_function_is_called(self):
		slot = format_utc_iso(datetime.now(timezone.utc).replace(microsecond=0))
		for what, argv in (
			("a Task's run", ["task", self.task, self.schedule, slot]),
			("an enqueue_at run", ["enqueue_at", self.request]),
		):
			before_fork, modules, _at_end = self.run_in_work_horse(*argv)
			self.assertEqual(
				run_loaded(NOT_BEFORE_THE_CALL, before_fork, modules),
				{},
				f"{what} loaded these before its function's call; import them where they are used",
			)

	def test_nothing_heavy_is_loaded_by_the_end_of_a_run_nobody_listens_to(self):
		self.assertFalse(run_rows.log_listened(), "this site listens to BTU Task Log: the test needs one that does not")
		slot = format_utc_iso(datetime.now(timezone.utc).replace(microsecond=0))
		for what, argv in (
			("a Task's run", ["task", self.task, self.schedule, slot]),
			("an enqueue_at run", ["enqueue_at", self.request]),
		):
			before_fork, _at_call, modules = self.run_in_work_horse(*argv)
			self.assertEqual(run_loaded(NOT_BY_THE_END, before_fork, modules), {}, f"{what} loaded these by its end")
		frappe.db.rollback()  # a new snapshot: the work-horse committed the Log
		log = frappe.get_all(
			"BTU Task Log",
			filters={"task": self.task},
			fields=["status", "task_desc_short", "execution_time", "start_lag_ms"],
		)
		self.assertEqual([(row.status, row.task_desc_short) for row in log], [("Succeeded", "test note_modules")])

	def test_a_log_listener_is_honoured_by_a_runs_end(self):
		"""Each kind of listener makes the Log's end a Document save (so it fires); a disabled one does not."""
		for doctype, values in (
			(
				"Notification",
				{
					"subject": "btu listener",
					"document_type": "BTU Task Log",
					"event": "Save",
					"channel": "System Notification",
					"enabled": 0,
				},
			),
			(
				"Webhook",
				{
					"name": "btu listener test",
					"webhook_doctype": "BTU Task Log",
					"webhook_docevent": "on_update",
					"request_url": "http://127.0.0.1:9/",
					"enabled": 0,
				},
			),
		):
			with self.subTest(doctype):
				doc = frappe.get_doc({"doctype": doctype, **values}).insert(ignore_permissions=True)
				try:
					self.assertFalse(run_rows.log_listened(), f"a disabled {doctype}")
					doc.db_set("enabled", 1)
					self.assertTrue(run_rows.log_listened(), f"an enabled {doctype}")
				finally:
					doc.delete(ignore_permissions=True)
		frappe.local.doc_events_hooks = {
			**frappe.get_doc_hooks(),
			"BTU Task Log": {"on_update": [f"{sample_tasks.__name__}.note_log_saved"]},
		}
		try:
			self.assertTrue(run_rows.log_listened(), "a doc_events hook on BTU Task Log")
			from btu.btu_core.runs.task_run import TaskRun

			sample_tasks.LOGS_SAVED.clear()
			log = TaskRun(self.task).execute()
			self.assertEqual(sample_tasks.LOGS_SAVED, [(log.name, "Succeeded")], "the hook ran on the Log's end")
		finally:
			del frappe.local.doc_events_hooks

	def test_the_desk_is_told_of_a_log_row_as_a_document_save_tells_it(self):
		from frappe.utils.background_jobs import get_redis_connection_without_auth

		log = frappe.get_doc({"doctype": "BTU Task Log", "task": self.task, "status": "Started"}).insert(
			ignore_permissions=True
		)
		frappe.db.commit()
		listener = get_redis_connection_without_auth().pubsub()
		listener.subscribe("events")
		listener.get_message(timeout=5)  # the subscription's confirmation
		try:
			log.status = "Succeeded"
			log.save(ignore_permissions=True)
			frappe.db.commit()
			published = [
				json.loads(message["data"])
				for message in iter(lambda: listener.get_message(timeout=2), None)
				if message["type"] == "message"
			]
		finally:
			listener.close()
			frappe.db.delete("BTU Task Log", {"name": log.name})
			frappe.db.commit()
		ours = run_rows.desk_messages(frappe._dict(name=log.name, modified=log.modified, modified_by=log.modified_by))
		theirs = [message for message in published if message.get("message", {}).get("name") == log.name]
		self.assertEqual(sorted(theirs, key=lambda m: m["event"]), sorted(ours, key=lambda m: m["event"]))

	def test_the_logs_numbers_are_its_not_null_columns(self):
		meta = frappe.get_meta("BTU Task Log")
		numbers = {
			field.fieldname
			for field in meta.fields
			if field.fieldtype in ("Float", "Int", "Check", "Currency", "Percent")
		}
		self.assertEqual(set(run_rows.LOG_NUMBERS), numbers)

	def test_an_unset_system_zone_is_frappes_default(self):
		from frappe.utils import get_system_timezone

		from btu.btu_core import instants

		def forget_system_settings():
			frappe.clear_document_cache("System Settings", "System Settings")
			if hasattr(frappe.local, "system_settings"):
				del frappe.local.system_settings

		frappe.db.sql("delete from `tabSingles` where doctype = 'System Settings' and field = 'time_zone'")
		forget_system_settings()
		# Frappe answers from its caches, which another process of the site may fill again with the committed zone
		# at any moment (v16's client cache reads Redis's): give it System Settings as this transaction reads them.
		frappe.local.system_settings = frappe.get_doc("System Settings")
		try:
			self.assertIsNone(frappe.local.system_settings.time_zone, "the zone unset in this transaction")
			self.assertEqual(str(instants.system_zone()), FRAPPE_DEFAULT_ZONE, "read as a row")
			self.assertEqual(get_system_timezone(), FRAPPE_DEFAULT_ZONE, "Frappe's own answer")
		finally:
			frappe.db.rollback()
			forget_system_settings()

	def test_migrate_writes_the_run_paths_bytecode(self):
		"""A bench that writes no bytecode (PYTHONDONTWRITEBYTECODE, uv) still runs BTU's run path compiled, as Python
		takes it: a .pyc whose header names the source's mtime and size."""
		from btu.btu_core import task_runner
		from btu.btu_core.setup import install

		self.assertIn("btu.btu_core.setup.install.compile_bytecode", frappe.get_hooks("after_migrate", app_name="btu"))
		cached = Path(importlib.util.cache_from_source(task_runner.__file__))
		cached.unlink(missing_ok=True)
		install.compile_bytecode()
		header = cached.read_bytes()[:16]
		source = os.stat(task_runner.__file__)
		self.assertEqual(
			(int.from_bytes(header[8:12], "little"), int.from_bytes(header[12:16], "little")),
			(int(source.st_mtime) & 0xFFFFFFFF, source.st_size & 0xFFFFFFFF),
		)

	def test_a_bench_worker_imports_the_run_path_before_it_forks_and_no_other_command_does(self):
		"""`bench worker` imports every app's commands module before it starts: btu.commands loads the run path there,
		so each work-horse it forks inherits it instead of importing it for each run; other bench commands stay as
		fast."""

		def imported(*command: str) -> set[str]:
			done = subprocess.run(
				[sys.executable, "-X", "importtime", "-m", "frappe.utils.bench_helper", "frappe", *command, "--help"],
				cwd=frappe.utils.get_bench_path() + "/sites",
				capture_output=True,
				text=True,
				timeout=patient(120),
			)
			self.assertEqual(done.returncode, 0, done.stderr[-3000:])
			return {
				line.rsplit("|", 1)[-1].strip() for line in done.stderr.splitlines() if line.startswith("import time:")
			}

		self.assertIn("btu.btu_core.task_runner", imported("worker"))
		self.assertNotIn("btu.btu_core.task_runner", imported("migrate"))

	def test_the_started_log_is_named_as_its_doctype_names_it(self):
		self.assertEqual(run_rows.LOG_NAMING, frappe.get_meta("BTU Task Log").autoname)

	def test_bucket_bounds_are_written_as_prometheus_writes_them(self):
		from prometheus_client.utils import floatToGoString

		for histogram in task_outcomes.HISTOGRAMS.values():
			self.assertEqual(histogram.les, tuple(map(floatToGoString, histogram.bounds)))
