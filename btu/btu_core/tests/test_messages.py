"""A shared error reaches the user in the user's language: the shared code's template is translated, then filled in.

One of each kind the Desk shows: a schedule's (ScheduleError), an undeclared function's (NotRunnable) and invalid
arguments' (ArgumentsError) on the form, and an undeclared function given to enqueue_at, named as its `method`."""

from datetime import timedelta

import frappe

from btu.btu_core.instants import utc_now
from btu.btu_core.runs.enqueue import EnqueueError, enqueue_at
from btu.btu_core.tests.utils import SAMPLES, make_schedule, make_task
from btu.shared import declared, task_args
from btu.shared.messages import InputError

try:
	from frappe.tests import IntegrationTestCase
except ImportError:
	from frappe.tests.utils import FrappeTestCase as IntegrationTestCase

UNDECLARED = f"{SAMPLES}.undeclared_task"


def template_of(refuse) -> str:
	"""The template of the InputError `refuse()` raises: what a translator translates."""
	try:
		refuse()
	except InputError as exc:
		return exc.template
	raise AssertionError(f"{refuse} raised nothing")


def refuse_undeclared():
	target = declared.target(UNDECLARED, ["btu"])
	declared.check_declared(
		target, defined_in=target.module, decorated=False, patterns=[], allow_any_app_function=False
	)


GERMAN = {
	"{name} {value} is outside {low}-{high}": "{name} {value} liegt nicht in {low}-{high}",  # a cron field out of range
	template_of(
		refuse_undeclared
	): "ist für BTU nicht als ausführbar deklariert; deklarieren Sie {path} in {app}/hooks.py",
	template_of(
		lambda: task_args.parse_arguments("{oops")
	): "ist kein gültiges JSON ({where}); schreiben Sie ein JSON-Objekt",
}


class TestMessages(IntegrationTestCase):
	def setUp(self):
		self.task = make_task()
		for source, german in GERMAN.items():
			frappe.get_doc(
				{"doctype": "Translation", "language": "de", "source_text": source, "translated_text": german}
			).insert()
		self.lang = frappe.local.lang

	def tearDown(self):
		frappe.local.lang = self.lang
		frappe.db.rollback()
		frappe.cache.delete_value(["lang_user_translations", "translation_assets"])

	def refusal(self, make, error=frappe.ValidationError) -> str:
		with self.assertRaises(error) as raised:
			make()
		return str(raised.exception)

	def test_a_schedule_error_is_shown_translated(self):
		frappe.local.lang = "de"
		message = self.refusal(
			lambda: make_schedule(self.task.name, run_frequency="Cron Style", cron_string="61 * * * *")
		)
		self.assertIn("cron_string '61 * * * *': minute 61 liegt nicht in 0-59", message)

	def test_in_english_it_reads_as_the_shared_code_wrote_it(self):
		frappe.local.lang = "en"
		message = self.refusal(
			lambda: make_schedule(self.task.name, run_frequency="Cron Style", cron_string="61 * * * *")
		)
		self.assertIn("cron_string '61 * * * *': minute 61 is outside 0-59", message)

	def test_an_undeclared_function_is_refused_translated(self):
		frappe.local.lang = "de"
		message = self.refusal(lambda: make_task("undeclared_task"))
		self.assertIn(
			f"function_string '{UNDECLARED}': ist für BTU nicht als ausführbar deklariert; deklarieren Sie "
			f"{UNDECLARED} in btu/hooks.py",
			message,
		)

	def test_arguments_that_are_not_json_are_refused_translated(self):
		frappe.local.lang = "de"
		message = self.refusal(lambda: make_task(arguments="{oops"))
		self.assertIn("arguments ist kein gültiges JSON (line 1, column 2: ", message)
		self.assertIn("); schreiben Sie ein JSON-Objekt", message)

	def test_enqueue_at_names_the_method_translated(self):
		frappe.local.lang = "de"
		message = self.refusal(lambda: enqueue_at(UNDECLARED, utc_now() + timedelta(minutes=1)), EnqueueError)
		self.assertIn(f"method '{UNDECLARED}': ist für BTU nicht als ausführbar deklariert", message)
