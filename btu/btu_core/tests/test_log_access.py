"""Who reads and deletes what a run left (issue 32 item 5), asked of Frappe's own permission API as each role: an
enqueued run's Log and its request's kwargs are a System Manager's, as Frappe's background jobs are; a Task run's Log
stays readable by BTU Managers; only a System Manager (and the retention) deletes Logs."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone
from unittest import mock

import frappe
import frappe.client

from btu.btu_core.runs.enqueue import enqueue_at
from btu.btu_core.runs.task_run import run_in_this_process
from btu.btu_core.task_runner import run_scheduled_task
from btu.btu_core.tests.utils import delete_committed, make_task, make_user, sealed_value
from btu.shared import protocol
from btu.shared.instants import parse_utc_iso
from btu.shared.run_kind import RunKey, RunKind

try:
	from frappe.tests import IntegrationTestCase
except ImportError:
	from frappe.tests.utils import FrappeTestCase as IntegrationTestCase

LOG = "BTU Task Log"
REQUEST = "BTU Run Request"
SAY_HELLO = "btu.btu_core.tests.sample_tasks.say_hello"
SECRET = "kwarg-only-the-app-should-see"
SYSTEM_MANAGER = "btu-access-system-manager@example.com"
MANAGER = "btu-access-manager@example.com"
METRICS_READER = "btu-access-metrics-reader@example.com"
PLAIN = "btu-access-plain@example.com"


class TestWhoReadsWhatARunLeft(IntegrationTestCase):
	"""One enqueued run with task_log=True and one Task run, both committed; each test reads them as one role."""

	@classmethod
	def setUpClass(cls):
		super().setUpClass()
		make_user(SYSTEM_MANAGER, ("System Manager",))
		make_user(MANAGER, ("BTU Manager",))
		make_user(METRICS_READER, ("BTU Metrics Reader",))
		make_user(PLAIN)
		frappe.set_user("Administrator")
		with mock.patch("btu.btu_core.scheduler_link.send", return_value=protocol.Reply("ok", "", None, 1.0)):
			cls.request = enqueue_at(
				SAY_HELLO, datetime.now(timezone.utc) + timedelta(minutes=5), task_log=True, name=SECRET
			)
			frappe.db.commit()
			run_at_utc = frappe.db.get_value(REQUEST, cls.request, "run_at_utc")
			slot = parse_utc_iso(run_at_utc, "run_at_utc").replace(microsecond=0).isoformat()
			run_scheduled_task(
				SAY_HELLO,
				RunKey(RunKind.RUN_REQUEST, cls.request).format(),
				slot,
				run_at_utc,
				kind=RunKind.RUN_REQUEST.value,
			)
		cls.enqueued_log = frappe.db.get_value(LOG, {"run_request": cls.request})
		cls.task = make_task(arguments=f'{{"name": "{SECRET}"}}').name
		frappe.db.commit()
		cls.task_log = run_in_this_process(cls.task).name
		assert cls.enqueued_log and SECRET in sealed_value(LOG, cls.enqueued_log, "stdout")

	@classmethod
	def tearDownClass(cls):
		frappe.set_user("Administrator")
		frappe.db.rollback()
		frappe.db.delete(LOG, {"run_request": cls.request})
		frappe.db.delete(REQUEST, {"name": cls.request})
		delete_committed(cls.task)
		super().tearDownClass()

	def tearDown(self):
		frappe.set_user("Administrator")

	def listed(self, doctype: str, fields: list[str]) -> dict:
		"""frappe.client.get_list as the REST API answers it: the rows of this test's runs, by name."""
		names = [self.enqueued_log, self.task_log] if doctype == LOG else [self.request]
		rows = frappe.client.get_list(doctype, fields=["name", *fields], filters={"name": ("in", names)})
		return {row["name"]: row for row in rows}

	def may_delete(self, name: str) -> bool:
		return bool(frappe.has_permission(LOG, "delete", doc=name, user=frappe.session.user))

	def test_a_system_manager_reads_every_log_and_the_kwargs_and_deletes_logs(self):
		frappe.set_user(SYSTEM_MANAGER)
		for log in (self.enqueued_log, self.task_log):
			frappe.get_doc(LOG, log).check_permission("read")
			self.assertIn(SECRET, frappe.client.get(LOG, log)["stdout"])
			self.assertTrue(self.may_delete(log))
		self.assertEqual(set(self.listed(LOG, ["stdout"])), {self.enqueued_log, self.task_log})
		self.assertIn(SECRET, frappe.client.get(REQUEST, self.request)["kwargs"])
		# Sealed: no list shows them, to anyone (test_nothing_learnable); the document does.
		self.assertIsNone(self.listed(REQUEST, ["kwargs"])[self.request]["kwargs"])

	def test_a_btu_manager_reads_task_runs_only_never_an_enqueued_runs_log_or_kwargs_and_deletes_no_log(self):
		frappe.set_user(MANAGER)
		with self.assertRaises(frappe.PermissionError):
			frappe.get_doc(LOG, self.enqueued_log).check_permission("read")
		with self.assertRaises(frappe.PermissionError):
			frappe.client.get(LOG, self.enqueued_log)
		frappe.get_doc(LOG, self.task_log).check_permission("read")
		self.assertIn(SECRET, frappe.client.get(LOG, self.task_log)["stdout"])
		self.assertEqual(set(self.listed(LOG, ["stdout"])), {self.task_log})
		for log in (self.enqueued_log, self.task_log):
			self.assertFalse(self.may_delete(log))
		# The request itself (what runs, when, as whom) is listed; its kwargs are not.
		request = frappe.client.get(REQUEST, self.request)
		self.assertEqual((request["method"], request.get("kwargs")), (SAY_HELLO, None))
		self.assertNotIn("kwargs", self.listed(REQUEST, ["method", "kwargs"])[self.request])

	def test_a_plain_user_and_the_metrics_reader_read_and_delete_nothing(self):
		for user in (PLAIN, METRICS_READER):
			frappe.set_user(user)
			for log in (self.enqueued_log, self.task_log):
				with self.subTest(user=user, log=log):
					with self.assertRaises(frappe.PermissionError):
						frappe.client.get(LOG, log)
					self.assertFalse(self.may_delete(log))
			for doctype in (LOG, REQUEST):
				with self.subTest(user=user, doctype=doctype), self.assertRaises(frappe.PermissionError):
					self.listed(doctype, [])
