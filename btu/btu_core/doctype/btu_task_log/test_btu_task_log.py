from datetime import timedelta

import frappe
from frappe.utils import now_datetime

from btu.btu_core.doctype.btu_task_log.btu_task_log import delete_expired_logs
from btu.btu_core.runs.lost_runs import mark_lost_runs_timed_out
from btu.btu_core.runs.time_limit import LOST_RUN_MARGIN_SECS
from btu.btu_core.tests.utils import delete_committed, make_task, sealed_value

try:
	from frappe.tests import IntegrationTestCase
except ImportError:
	from frappe.tests.utils import FrappeTestCase as IntegrationTestCase


def make_log(task: str, **values):
	return frappe.get_doc({"doctype": "BTU Task Log", "task": task, "status": "Started", **values}).insert(
		ignore_permissions=True
	)


class TestBTUTaskLog(IntegrationTestCase):
	def setUp(self):
		self.retention = frappe.db.get_single_value("BTU Configuration", "log_retention_days")
		self.task = make_task(max_task_duration=60)

	def tearDown(self):
		delete_committed(self.task.name)
		frappe.db.set_single_value("BTU Configuration", "log_retention_days", self.retention)
		frappe.db.commit()

	def test_lost_run_is_marked_timed_out(self):
		lost = make_log(
			self.task.name, date_time_started=now_datetime() - timedelta(seconds=60 + LOST_RUN_MARGIN_SECS + 5)
		)
		running = make_log(self.task.name, date_time_started=now_datetime() - timedelta(seconds=30))
		marked = mark_lost_runs_timed_out()
		self.assertIn(lost.name, marked)
		self.assertNotIn(running.name, marked)
		self.assertEqual(frappe.db.get_value("BTU Task Log", lost.name, "status"), "Timed Out")
		self.assertIn("killed or lost", sealed_value("BTU Task Log", lost.name, "result_message"))
		self.assertEqual(frappe.db.get_value("BTU Task Log", running.name, "status"), "Started")

	def test_retention_deletes_only_old_logs(self):
		frappe.db.set_single_value("BTU Configuration", "log_retention_days", 30)
		old = make_log(self.task.name, status="Succeeded")
		frappe.db.set_value(
			"BTU Task Log", old.name, "creation", now_datetime() - timedelta(days=31), update_modified=False
		)
		new = make_log(self.task.name, status="Succeeded")
		delete_expired_logs()
		self.assertFalse(frappe.db.exists("BTU Task Log", old.name))
		self.assertTrue(frappe.db.exists("BTU Task Log", new.name))

	def test_zero_retention_keeps_everything(self):
		frappe.db.set_single_value("BTU Configuration", "log_retention_days", 0)
		old = make_log(self.task.name, status="Succeeded")
		frappe.db.set_value(
			"BTU Task Log", old.name, "creation", now_datetime() - timedelta(days=3650), update_modified=False
		)
		self.assertEqual(delete_expired_logs(), 0)
		self.assertTrue(frappe.db.exists("BTU Task Log", old.name))
