"""Every whitelisted BTU method refuses Guest and users without a BTU role."""

import importlib
import inspect

import frappe

import btu.btu_core.api as api
from btu.btu_core.doctype.btu_task_schedule.btu_task_schedule import BTUTaskSchedule
from btu.btu_core.tests.utils import make_schedule, make_task, make_user

try:
	from frappe.tests import IntegrationTestCase
except ImportError:
	from frappe.tests.utils import FrappeTestCase as IntegrationTestCase

PLAIN_USER = "btu-plain-user@example.com"
MANAGER_USER = "btu-manager-user@example.com"


def whitelisted_api_methods():
	return [
		fn
		for name, fn in inspect.getmembers(api, inspect.isfunction)
		if fn.__module__ == api.__name__ and fn in frappe.whitelisted
	]


def whitelisted_doc_methods():
	found = []
	for module in ("btu_task", "btu_task_schedule", "btu_task_log", "btu_configuration"):
		controller = importlib.import_module(f"btu.btu_core.doctype.{module}.{module}")
		for cls in (
			c for _, c in inspect.getmembers(controller, inspect.isclass) if c.__module__ == controller.__name__
		):
			# Only BTU's own methods; the ones inherited from Document are Frappe's.
			found += [(cls, fn) for fn in vars(cls).values() if inspect.isfunction(fn) and fn in frappe.whitelisted]
	return found


class TestRoles(IntegrationTestCase):
	@classmethod
	def setUpClass(cls):
		super().setUpClass()
		make_user(PLAIN_USER)
		make_user(MANAGER_USER, ("BTU Manager",))

	def setUp(self):
		self.task = make_task()
		self.schedule = make_schedule(self.task.name)
		self.arguments = {
			"task": self.task.name,
			"schedule": self.schedule.name,
			"at": "2030-01-01 00:00:00",
			"on": "worker",
		}

	def tearDown(self):
		frappe.set_user("Administrator")

	def call_as(self, user, fn):
		frappe.set_user(user)
		parameters = inspect.signature(fn).parameters
		return fn(
			**{
				# Of the parameter's type: Frappe's whitelist refuses another type before the method runs.
				name: self.arguments.get(name, 1 if p.annotation is int else "x")
				for name, p in parameters.items()
				if p.default is inspect.Parameter.empty
			}
		)

	def test_the_api_has_the_expected_methods(self):
		names = {fn.__name__ for fn in whitelisted_api_methods()}
		self.assertTrue(
			{"ping", "status", "run_task_now", "run_once_at", "pause", "resume", "next_fires", "resync"} <= names, names
		)
		self.assertIn((BTUTaskSchedule, BTUTaskSchedule.preview_next_fires), whitelisted_doc_methods())

	def test_guest_and_plain_user_are_refused_everywhere(self):
		for user in ("Guest", PLAIN_USER):
			for fn in whitelisted_api_methods():
				with self.subTest(user=user, method=fn.__name__):
					with self.assertRaises(frappe.PermissionError):
						self.call_as(user, fn)
			for cls, fn in whitelisted_doc_methods():
				doc = self.schedule if cls is BTUTaskSchedule else frappe.get_doc("BTU Task", self.task.name)
				with self.subTest(user=user, method=f"{cls.__name__}.{fn.__name__}"):
					frappe.set_user(user)
					with self.assertRaises(frappe.PermissionError):
						getattr(doc, fn.__name__)()

	def test_btu_manager_is_allowed(self):
		frappe.set_user(MANAGER_USER)
		fires = api.next_fires(self.schedule.name, 3)
		self.assertEqual(len(fires["fires"]), 3)
		self.assertIn("published", api.status())
		self.assertIn("html", self.schedule.preview_next_fires(2))
