"""`btu.btu_core.api.run_once_at`: a Task's one-off schedule from the Desk's "Run Once At..." or REST."""

from datetime import datetime

import frappe

from btu.btu_core import api
from btu.btu_core.instants import from_system_naive
from btu.btu_core.tests.utils import make_task
from btu.shared.instants import parse_utc_iso

try:
	from frappe.tests import IntegrationTestCase
except ImportError:
	from frappe.tests.utils import FrappeTestCase as IntegrationTestCase


class TestRunOnceAt(IntegrationTestCase):
	def setUp(self):
		frappe.set_user("Administrator")
		self.task = make_task()

	def tearDown(self):
		frappe.db.rollback()

	def schedule(self, at: str):
		made = api.run_once_at(self.task.name, at)
		return frappe.get_doc("BTU Task Schedule", made["schedule"])

	def test_an_instant_with_an_offset_is_that_instant(self):
		schedule = self.schedule("2030-12-01T10:00:00+05:00")
		self.assertEqual(
			(schedule.enabled, schedule.run_frequency, schedule.time_zone),
			(1, "Once", frappe.utils.get_system_timezone()),
		)
		self.assertEqual(
			from_system_naive(frappe.utils.get_datetime(schedule.run_at)), parse_utc_iso("2030-12-01T05:00:00Z", "at")
		)

	def test_a_date_and_time_without_offset_is_the_system_zones(self):
		schedule = self.schedule("2030-12-01 10:00:00")
		self.assertEqual(frappe.utils.get_datetime(schedule.run_at), datetime(2030, 12, 1, 10, 0))

	def test_unreadable_text_is_refused_naming_at(self):
		with self.assertRaisesRegex(frappe.ValidationError, "at 'next tuesday': give a date and time"):
			self.schedule("next tuesday")
