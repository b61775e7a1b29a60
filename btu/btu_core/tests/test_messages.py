"""A schedule's error reaches the user in the user's language: the shared code's template is translated, then filled in."""

import frappe

from btu.btu_core.tests.utils import make_schedule, make_task

try:
	from frappe.tests import IntegrationTestCase
except ImportError:
	from frappe.tests.utils import FrappeTestCase as IntegrationTestCase

TEMPLATE = "{name} {value} is outside {low}-{high}"  # btu/shared/schedule/cron.py, a cron field's value out of range


class TestMessages(IntegrationTestCase):
	def setUp(self):
		self.task = make_task()
		frappe.get_doc({"doctype": "Translation", "language": "de", "source_text": TEMPLATE, "translated_text": "{name} {value} liegt nicht in {low}-{high}"}).insert()
		self.lang = frappe.local.lang

	def tearDown(self):
		frappe.local.lang = self.lang
		frappe.db.rollback()
		frappe.cache.delete_value(["lang_user_translations", "translation_assets"])

	def test_a_schedule_error_is_shown_translated(self):
		frappe.local.lang = "de"
		with self.assertRaises(frappe.ValidationError) as raised:
			make_schedule(self.task.name, run_frequency="Cron Style", cron_string="61 * * * *")
		self.assertIn("cron_string '61 * * * *': minute 61 liegt nicht in 0-59", str(raised.exception))

	def test_in_english_it_reads_as_the_shared_code_wrote_it(self):
		frappe.local.lang = "en"
		with self.assertRaises(frappe.ValidationError) as raised:
			make_schedule(self.task.name, run_frequency="Cron Style", cron_string="61 * * * *")
		self.assertIn("cron_string '61 * * * *': minute 61 is outside 0-59", str(raised.exception))
