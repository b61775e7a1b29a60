"""A Desk role cannot make BTU run arbitrary code: declared functions only, code fields System Manager only."""

import json
import os
import tempfile
import uuid
from contextlib import contextmanager

import frappe

from btu.btu_core import api
from btu.btu_core.runs.task_inputs import TaskInputError
from btu.btu_core.runs.task_run import TaskRun, run_in_this_process
from btu.btu_core.tests.utils import SAMPLES, delete_committed, make_schedule, make_task, make_user, sealed_value
from btu.shared import declared

try:
	from frappe.tests import IntegrationTestCase
except ImportError:
	from frappe.tests.utils import FrappeTestCase as IntegrationTestCase

MANAGER = "btu-security-manager@example.com"
SHARED_WITH = "btu-security-shared@example.com"
SYSTEM_MANAGER = "btu-security-sysmanager@example.com"
HATCH = "btu_allow_any_app_function"


class TestDeclaredFunctions(IntegrationTestCase):
	def test_stdlib_and_builtins_are_refused_on_save(self):
		for path in ("os.system", "subprocess.getoutput", "builtins.eval", "posix.system", "btu_evil.tasks.run"):
			with self.subTest(path=path), self.assertRaises(frappe.ValidationError) as caught:
				make_task(function_string=path, arguments='{"command": "id"}')
			message = str(caught.exception)
			self.assertIn(f"function_string '{path}'", message)
			self.assertIn("is not an installed app", message)

	def test_an_undeclared_function_of_an_installed_app_is_refused_with_how_to_declare_it(self):
		with self.assertRaises(frappe.ValidationError) as caught:
			make_task("undeclared_task")
		message = str(caught.exception)
		self.assertIn(f"'{SAMPLES}.undeclared_task': is not declared runnable by BTU", message)
		self.assertIn(f'btu_tasks = ["{SAMPLES}.undeclared_task"]', message)
		self.assertIn("@runnable (from btu import runnable)", message)

	def test_a_name_imported_into_an_apps_module_is_refused(self):
		with self.assertRaises(frappe.ValidationError) as caught:
			make_task("runnable")  # sample_tasks did `from btu import runnable`
		self.assertIn("is defined in btu.shared.declared and only imported into", str(caught.exception))
		with self.assertRaises(frappe.ValidationError) as caught:
			make_task("timezone")  # sample_tasks did `from datetime import timezone`: a class, not a function
		self.assertIn("not a function defined with def", str(caught.exception))

	def test_declared_by_hook_or_decorator_saves(self):
		# A function of btu's own btu_tasks hook (BTU's maintenance), not decorated: declared by the hook alone.
		hooked = next(path for path in frappe.get_hooks("btu_tasks", app_name="btu") if "*" not in path)
		self.assertFalse(getattr(frappe.get_attr(hooked), declared.MARK, False), hooked)
		self.assertTrue(make_task(function_string=hooked).name)
		self.assertTrue(make_task("say_hello").name)

	def test_the_escape_hatch_allows_undeclared_functions_of_installed_apps_only(self):
		for off in (None, 0, "0", "false"):
			with self.subTest(value=off), hatch(off), self.assertRaises(frappe.ValidationError):
				make_task("undeclared_task")
		with hatch(1):
			self.assertTrue(make_task("undeclared_task").name)
			for path in ("os.system", f"{SAMPLES}.runnable"):
				with self.subTest(path=path), self.assertRaises(frappe.ValidationError):
					make_task(function_string=path)


class TestFixturesOutOfProduction(IntegrationTestCase):
	"""BTU's test fixtures (btu.btu_core.tests.sample_tasks, declared @runnable) ship in the package: a site that does
	not run tests (no allow_tests in its config) refuses them on save and at run time, whatever else allows them."""

	def test_a_fixture_is_refused_on_save(self):
		for off in (None, 0, "0", "false"):
			with self.subTest(allow_tests=off), in_conf(declared.ALLOW_TESTS, off), hatch(1):
				with self.assertRaises(frappe.ValidationError) as caught:
					make_task("say_hello")
				message = str(caught.exception)
				self.assertIn(
					f"function_string '{SAMPLES}.say_hello': is in {SAMPLES}, a test module of app btu", message
				)
				self.assertIn("set-config allow_tests true", message)

	def test_a_fixture_saved_on_a_test_site_does_not_run_on_a_production_one(self):
		task = make_task("say_hello", arguments='{"name": "Ada"}')
		with in_conf(declared.ALLOW_TESTS, None):
			log = run_in_this_process(task.name)
		self.assertEqual(log.status, "Failed")
		self.assertIn("a test module of app btu", log.result_message)
		self.assertNotIn("hello Ada", log.stdout or "")
		self.assertEqual(run_in_this_process(task.name).status, "Succeeded")


class TestRunTimeCheck(IntegrationTestCase):
	"""A Task row that holds an undeclared function (an old row, a forced UPDATE) fails its run and does not run it."""

	def setUp(self):
		self.tasks = []
		self.marker = os.path.join(tempfile.gettempdir(), f"btu-security-{uuid.uuid4().hex}")

	def tearDown(self):
		for task in self.tasks:
			delete_committed(task)
		if os.path.exists(self.marker):
			os.remove(self.marker)

	def forced(self, function_string: str, arguments: dict) -> tuple[str, str]:
		"""A valid Task and Schedule, then the Task's function and arguments changed with SQL."""
		task = make_task()
		self.tasks.append(task.name)
		schedule = make_schedule(task.name)
		frappe.db.sql(
			"update `tabBTU Task` set function_string=%s, arguments=%s where name=%s",
			(function_string, json.dumps(arguments), task.name),
		)
		frappe.db.commit()
		return task.name, schedule.name

	def test_os_system_forced_in_with_sql_fails_every_kind_of_run(self):
		task, schedule = self.forced("os.system", {"command": f"touch {self.marker}"})
		web = run_in_this_process(task)
		with self.assertRaises(TaskInputError):
			TaskRun(task, schedule=schedule).execute()
		via_api = api.run_task_now(task, on="webserver")
		logs = [
			frappe.get_doc("BTU Task Log", name)
			for name in frappe.get_all("BTU Task Log", {"task": task}, pluck="name")
		]
		self.assertEqual(len(logs), 3)
		for log in logs:
			self.assertEqual(log.status, "Failed")
			self.assertIn("function_string 'os.system': 'os' is not an installed app", log.result_message)
		self.assertEqual((web.status, via_api["status"]), ("Failed", "Failed"))
		self.assertFalse(os.path.exists(self.marker), "os.system ran")

	def test_an_undeclared_function_forced_in_fails_its_run_without_running(self):
		task, _ = self.forced(f"{SAMPLES}.undeclared_task", {})
		log = run_in_this_process(task)
		self.assertEqual(log.status, "Failed")
		self.assertIn("is not declared runnable by BTU", log.result_message)
		self.assertNotIn("undeclared_task ran", log.stdout)
		with hatch(1):
			self.assertEqual(run_in_this_process(task).status, "Succeeded")


class TestCodeFieldsNeedSystemManager(IntegrationTestCase):
	@classmethod
	def setUpClass(cls):
		super().setUpClass()
		make_user(MANAGER, ("BTU Manager",))
		make_user(SHARED_WITH)
		make_user(SYSTEM_MANAGER, ("System Manager",))

	def setUp(self):
		self.task = make_task(arguments='{"name": "Ada"}')
		self.schedule = make_schedule(self.task.name)
		frappe.share.add("BTU Task", self.task.name, SHARED_WITH, read=1, write=1, share=1)
		frappe.share.add("BTU Task Schedule", self.schedule.name, SHARED_WITH, read=1, write=1)

	def tearDown(self):
		frappe.set_user("Administrator")

	def stored(self, field: str):
		if field == "arguments":
			return sealed_value("BTU Task", self.task.name, field)
		return frappe.db.get_value("BTU Task", self.task.name, field)

	def test_btu_manager_and_shared_user_cannot_change_function_or_arguments(self):
		declared_elsewhere = f"{SAMPLES}.needs_company"
		for user in (MANAGER, SHARED_WITH):
			for field, value in (("function_string", declared_elsewhere), ("arguments", '{"name": "Mallory"}')):
				with self.subTest(user=user, field=field):
					frappe.set_user(user)
					doc = frappe.get_doc("BTU Task", self.task.name)
					doc.set(field, value)
					# The Desk path: permlevel 1 puts the old value back.
					try:
						doc.save()
					except frappe.PermissionError:
						pass
					self.assertEqual(self.stored(field), self.task.get(field))
					# Any path that skips Frappe's permission checks: validate refuses.
					doc = frappe.get_doc("BTU Task", self.task.name)
					doc.set(field, value)
					with self.assertRaises(frappe.PermissionError) as caught:
						doc.save(ignore_permissions=True)
					self.assertIn(f"only a System Manager may set {field}", str(caught.exception))
					self.assertIn(user, str(caught.exception))
					frappe.set_user("Administrator")
					self.assertEqual(self.stored(field), self.task.get(field))

	def test_btu_manager_can_still_edit_the_other_fields_and_run_tasks(self):
		frappe.set_user(MANAGER)
		doc = frappe.get_doc("BTU Task", self.task.name)
		doc.desc_short = "renamed by the manager"
		doc.save()
		self.assertEqual(self.stored("desc_short"), "renamed by the manager")
		self.assertEqual(frappe.get_doc("BTU Task", self.task.name).function_string, self.task.function_string)

	def test_btu_manager_cannot_create_a_task(self):
		frappe.set_user(MANAGER)
		with self.assertRaises(frappe.PermissionError):
			make_task()
		with self.assertRaises(frappe.PermissionError):
			frappe.get_doc(
				{
					"doctype": "BTU Task",
					"desc_short": "x",
					"function_string": f"{SAMPLES}.say_hello",
					"queue_name": "default",
				}
			).insert(ignore_permissions=True)

	def test_argument_overrides_need_system_manager_but_other_schedule_edits_do_not(self):
		frappe.set_user(MANAGER)
		self.assertTrue(make_schedule(self.task.name).name, "a schedule without overrides")
		# The Desk path: permlevel 1 drops the value.
		self.assertFalse(make_schedule(self.task.name, argument_overrides='{"name": "Mallory"}').argument_overrides)
		with self.assertRaises(frappe.PermissionError):
			frappe.get_doc(
				{
					"doctype": "BTU Task Schedule",
					"task": self.task.name,
					"enabled": 0,
					"run_frequency": "Daily",
					"hour": 2,
					"minute": 30,
					"time_zone": "UTC",
					"argument_overrides": '{"name": "Mallory"}',
				}
			).insert(ignore_permissions=True)
		for user in (MANAGER, SHARED_WITH):
			with self.subTest(user=user):
				frappe.set_user(user)
				doc = frappe.get_doc("BTU Task Schedule", self.schedule.name)
				doc.argument_overrides = '{"name": "Mallory"}'
				with self.assertRaises(frappe.PermissionError):
					doc.save(ignore_permissions=True)
				frappe.set_user("Administrator")
				self.assertFalse(sealed_value("BTU Task Schedule", self.schedule.name, "argument_overrides"))
		frappe.set_user(MANAGER)
		doc = frappe.get_doc("BTU Task Schedule", self.schedule.name)
		doc.hour = 3
		doc.save()

	def test_system_manager_may_change_them(self):
		frappe.set_user(SYSTEM_MANAGER)
		doc = frappe.get_doc("BTU Task", self.task.name)
		doc.function_string = f"{SAMPLES}.needs_company"
		doc.arguments = '{"company": "ACME"}'
		doc.save()
		self.assertEqual(self.stored("function_string"), f"{SAMPLES}.needs_company")


def hatch(value):
	"""`btu_allow_any_app_function` in this site's config for the block, as site_config.json would set it."""
	return in_conf(HATCH, value)


@contextmanager
def in_conf(key: str, value):
	"""`key` in this site's config for the block, as site_config.json would set it."""
	before = frappe.local.conf.get(key)
	frappe.local.conf[key] = value
	try:
		yield
	finally:
		frappe.local.conf[key] = before
