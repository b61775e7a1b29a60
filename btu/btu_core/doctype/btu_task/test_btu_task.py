from unittest.mock import patch

import frappe
from frappe.exceptions import FrappeTypeError

from btu.btu_core import api
from btu.btu_core.tests.utils import SAMPLES, make_schedule, make_task
from btu.shared import protocol
from btu.shared.keys import MAX_CONCURRENT_RUNS

try:
	from frappe.tests import IntegrationTestCase
except ImportError:
	from frappe.tests.utils import FrappeTestCase as IntegrationTestCase


class TestBTUTask(IntegrationTestCase):
	def test_valid_task_saves(self):
		task = make_task(arguments='{"name": "Ada", "punctuation": "?"}')
		self.assertTrue(task.name.startswith("BTU-"))

	def test_arguments_parse_error_names_line_and_column(self):
		with self.assertRaises(frappe.ValidationError) as caught:
			make_task(arguments='{\n  "name": "Ada",\n  "punctuation": \'!\'\n}')
		message = str(caught.exception)
		self.assertIn("arguments", message)
		self.assertIn("line 3, column 18", message)

	def test_arguments_must_be_an_object(self):
		with self.assertRaises(frappe.ValidationError) as caught:
			make_task(arguments='["Ada"]')
		self.assertIn("JSON object", str(caught.exception))
		self.assertIn("array", str(caught.exception))

	def test_function_must_import(self):
		with self.assertRaises(frappe.ValidationError) as caught:
			make_task(function_string="btu.no_such_module.run")
		self.assertIn("'btu.no_such_module.run'", str(caught.exception))
		self.assertIn("cannot be imported", str(caught.exception))

	def test_function_must_exist(self):
		with self.assertRaises(frappe.ValidationError) as caught:
			make_task(function="no_such_function")
		self.assertIn("has no attribute 'no_such_function'", str(caught.exception))

	def test_function_must_be_callable(self):
		with self.assertRaises(frappe.ValidationError) as caught:
			make_task(function="NOT_A_FUNCTION")
		self.assertIn("not a function", str(caught.exception))

	def test_unknown_keyword_argument_is_refused(self):
		with self.assertRaises(frappe.ValidationError) as caught:
			make_task(arguments='{"colour": "red"}')
		self.assertIn("colour", str(caught.exception))
		self.assertIn(f"{SAMPLES}.say_hello", str(caught.exception))

	def test_missing_argument_is_left_to_schedules(self):
		task = make_task(function="needs_company")
		self.assertEqual(task.function_string, f"{SAMPLES}.needs_company")

	def test_queue_must_exist_on_this_bench(self):
		with self.assertRaises(frappe.ValidationError) as caught:
			make_task(queue_name="nightly")
		message = str(caught.exception)
		self.assertIn("queue_name 'nightly'", message)
		self.assertIn("short, default, long", message)

	def test_default_recipients_come_from_the_configuration(self):
		config = frappe.get_single("BTU Configuration")
		config.set(
			"email_recipients", [{"email_address": "ops@example.com", "email_on_error": 1, "email_on_timeout": 1}]
		)
		config.save()
		task = make_task()
		self.assertEqual(
			[(r.email_address, r.email_on_error, r.email_on_timeout) for r in task.email_recipients],
			[("ops@example.com", 1, 1)],
		)

	def test_max_concurrent_runs_is_on_the_form_and_bounded(self):
		field = frappe.get_meta("BTU Task").get_field("max_concurrent_runs")
		self.assertEqual((field.fieldtype, field.default), ("Int", "0"))
		self.assertIn("Run Now jobs are not counted", field.description)
		self.assertEqual(make_task().max_concurrent_runs, 0)
		self.assertEqual(make_task(max_concurrent_runs=2).max_concurrent_runs, 2)
		with self.assertRaises(frappe.ValidationError) as caught:
			make_task(max_concurrent_runs=MAX_CONCURRENT_RUNS + 1)
		self.assertIn("Max Concurrent Runs", str(caught.exception))

	def test_a_changed_limit_tells_the_scheduler_about_the_enabled_schedules(self):
		task = make_task()
		enabled = make_schedule(task.name, enabled=1)
		make_schedule(task.name, enabled=0)
		with patch("btu.btu_core.doctype.btu_task.btu_task.announce_after_commit") as announce:
			task.desc_short = "renamed"
			task.save()
			announce.assert_not_called()
			task.max_concurrent_runs = 1
			task.save()
		announce.assert_called_once_with(protocol.CREATE_TASK_SCHEDULE, enabled.name)

	def test_the_api_sets_the_limit(self):
		task = make_task()
		self.assertEqual(api.set_max_concurrent_runs(task.name, "2"), {"task": task.name, "max_concurrent_runs": 2})
		self.assertEqual(frappe.db.get_value("BTU Task", task.name, "max_concurrent_runs"), 2)
		for wrong in ("two", "-1", str(MAX_CONCURRENT_RUNS + 1)):
			# "two" is refused by Frappe's whitelist, against the parameter's type (FrappeTypeError, HTTP 417 too).
			with self.subTest(limit=wrong), self.assertRaises((frappe.ValidationError, FrappeTypeError)) as caught:
				api.set_max_concurrent_runs(task.name, wrong)
			self.assertIn("limit", str(caught.exception))
