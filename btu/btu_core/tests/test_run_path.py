"""What a run loads before its function is called: a forked work-horse pays for each module on every run.

Each run starts in a fresh interpreter holding what `bench worker` holds before it forks (frappe, its background
jobs, rq), connected as a work-horse is: one Task for a slot through `run_scheduled_task`, one `enqueue_at` request
through `run_request`; the function notes the modules loaded when it is called. Alerts' HTTP and mail code,
Prometheus's library, Frappe's Document (and with it its Notification machinery), its query engine and defaults code,
the Scheduled Job Type controller and the schedule rules are for later steps or other runs: none may be loaded by then.
"""

import json
import subprocess
import sys
from datetime import datetime, timedelta, timezone

import frappe

from btu.btu_core import run_rows
from btu.btu_core.tests.utils import delete_committed, make_schedule, make_task
from btu.shared import task_outcomes
from btu.shared.instants import format_utc_iso

try:
	from frappe.tests import IntegrationTestCase
except ImportError:
	from frappe.tests.utils import FrappeTestCase as IntegrationTestCase

# Module (or package) -> what loads it, were it loaded before the call.
NOT_BEFORE_THE_CALL = {
	"requests": "alerts' webhook POST (alerts.post)",
	"urllib3": "alerts' webhook POST, through requests",
	"smtplib": "mail sending (Frappe's Email Queue sends it, never the run)",
	"prometheus_client": "the metrics scrape (metrics.scrape, task_outcomes.families)",
	"frappe.model.document": "Frappe's Document: get_doc, and System Settings through get_system_timezone or "
	"now_datetime (instants.system_zone reads the zone as a row)",
	"frappe.email.doctype.notification.notification": "Document.insert/save (the Log's start must be a row)",
	"frappe.model.create_new": "Document defaults (the Log's start must be a row)",
	"frappe.database.query": "frappe.db.get_value/exists/set_value with filters (plain SQL before the call)",
	"frappe.utils.response": "the RPC telling the scheduler a request is Done, and its realtime message (after the call)",
	"frappe.core.doctype.scheduled_job_type.scheduled_job_type": "btu_core.scheduled_jobs (Frappe job runs only)",
	"btu.shared.schedule": "a schedule's rules (late-start alert and retries' next fire, after the call)",
	"croniter": "a schedule's rules, through btu.shared.schedule",
}

WORK_HORSE = """
import json, sys
import frappe, frappe.utils.background_jobs, rq  # what `bench worker` holds when it forks
frappe.init(site=sys.argv[1], sites_path=".")
frappe.connect()
frappe.set_user("Administrator")
from btu.btu_core.tests import sample_tasks
from btu.btu_core.task_runner import run_request, run_scheduled_task
if sys.argv[2] == "task":
	run_scheduled_task(*sys.argv[3:6])
else:
	run_request("run-request:" + sys.argv[3], None, None)
frappe.db.commit()
print(json.dumps([sorted(modules) for modules in sample_tasks.MODULES_AT_CALL]))
"""


class TestRunPath(IntegrationTestCase):
	def setUp(self):
		self.task = make_task("note_modules").name
		self.schedule = make_schedule(self.task).name
		import btu

		self.request = btu.enqueue_at("btu.btu_core.tests.sample_tasks.note_modules", datetime.now(timezone.utc) + timedelta(hours=1))
		frappe.db.commit()

	def tearDown(self):
		frappe.db.rollback()
		frappe.db.delete("BTU Run Request", {"name": self.request})
		delete_committed(self.task)

	def test_nothing_heavy_is_loaded_before_the_function_is_called(self):
		slot = format_utc_iso(datetime.now(timezone.utc).replace(microsecond=0))
		for what, argv in (("a Task's run", ["task", self.task, self.schedule, slot]), ("an enqueue_at run", ["enqueue_at", self.request])):
			done = subprocess.run(
				[sys.executable, "-c", WORK_HORSE, frappe.local.site, *argv],
				cwd=frappe.utils.get_bench_path() + "/sites", capture_output=True, text=True, timeout=120,
			)
			self.assertEqual(done.returncode, 0, done.stderr[-3000:])
			[modules] = json.loads(done.stdout.strip().splitlines()[-1])
			loaded = {
				name: why for name, why in NOT_BEFORE_THE_CALL.items()
				if any(module == name or module.startswith(name + ".") for module in modules)
			}
			self.assertEqual(loaded, {}, f"{what} loaded these before its function's call; import them where they are used")

	def test_the_started_log_is_named_as_its_doctype_names_it(self):
		self.assertEqual(run_rows.LOG_NAMING, frappe.get_meta("BTU Task Log").autoname)

	def test_bucket_bounds_are_written_as_prometheus_writes_them(self):
		from prometheus_client.utils import floatToGoString

		for histogram in task_outcomes.HISTOGRAMS.values():
			self.assertEqual(histogram.les, tuple(map(floatToGoString, histogram.bounds)))
