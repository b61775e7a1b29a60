"""The BTU Task form in a real browser: creating a Task, what each person may change, and its Run menu."""

from __future__ import annotations

import json
from datetime import datetime, timedelta
from zoneinfo import ZoneInfo

import frappe
from selenium.webdriver.common.by import By

from btu.btu_core.tests.desk.case import DeskTestCase
from btu.btu_core.tests.desk.forms import (
	REFUSED_REQUEST,
	alert_matching,
	buttons_shown,
	close_dialog,
	datetime_pattern,
	fill_code,
	open_list_row,
	read_only,
	refused,
	save_form,
	shown,
	typed_datetime,
)
from btu.btu_core.tests.desk.people import Person
from btu.btu_core.tests.desk.records import (
	committed_task,
	fresh_value,
	in_zone,
	unique,
)
from btu.btu_core.tests.desk.worker import perform_job
from btu.btu_core.tests.utils import SAMPLES

WHO_CREATES = "Only a System Manager creates BTU Tasks, since a Task chooses the code that runs."


class TestTaskDesk(DeskTestCase):
	# -- the form --------------------------------------------------------------------------------------------------

	def test_a_system_manager_creates_a_task(self):
		browser = self.as_person(Person.SYSTEM_MANAGER)
		title = unique("desk greeting")
		self.addCleanup(delete_tasks_titled, title)
		browser.open("/app/btu-task/new")
		browser.fill("desc_short", title)
		# No Tab out of Path to Function: Frappe's tab order moves into the Code field next, whose Ace editor has no
		# set_focus (a TypeError of Frappe's own); the person clicks into the arguments instead.
		browser.fill("function_string", f"{SAMPLES}.say_hello", blur=False)
		fill_code(browser, "arguments", '{"name": "Ada", "punctuation": "?"}')
		browser.fill("queue_name", "short")
		browser.fill("max_task_duration", "90")
		save_form(browser)
		self.assertFalse(browser.dialog_open(), browser.visible_text()[-500:])
		self.assertRegex(browser.route(), r"^Form/BTU Task/BTU-\d+$")
		browser.wait_for_text(title)
		self.assertEqual(shown(browser, "function_string"), f"{SAMPLES}.say_hello")
		self.assertEqual(json.loads(browser.value("arguments")), {"name": "Ada", "punctuation": "?"})
		self.assertEqual(shown(browser, "queue_name"), "short")
		self.assertEqual(shown(browser, "max_task_duration"), "90")
		browser.button("Run")  # the saved Task's Run menu
		stored = fresh_value(
			"BTU Task",
			browser.route().rsplit("/", 1)[1],
			["desc_short", "function_string", "queue_name", "max_task_duration"],
		)
		self.assertEqual(stored, (title, f"{SAMPLES}.say_hello", "short", 90))

	def test_a_bad_function_or_bad_json_gets_a_readable_message(self):
		browser = self.as_person(Person.SYSTEM_MANAGER)
		title = unique("desk bad input")
		self.addCleanup(delete_tasks_titled, title)
		browser.open("/app/btu-task/new")
		browser.fill("desc_short", title)
		for function, arguments, message in (
			("undeclared_task", "", "is not declared runnable by BTU"),
			("say_hello", '{"name": "Ada",', "arguments is not valid JSON (line 1, column 16"),
			("say_hello", '{"nobody": 1}', "got an unexpected keyword argument 'nobody'"),
		):
			browser.fill("function_string", f"{SAMPLES}.{function}", blur=False)
			fill_code(browser, "arguments", arguments)
			browser.expect_console(REFUSED_REQUEST)
			save_form(browser)
			text = browser.dialog_text()
			self.assertIn("invalid input", text)
			self.assertIn(message, text)
			close_dialog(browser)
		self.assertTrue(browser.route().startswith("Form/BTU Task/new"))
		self.assertIsNone(fresh_value("BTU Task", {"desc_short": title}))

	def test_a_btu_manager_is_told_a_system_manager_creates_tasks(self):
		browser = self.as_person(Person.BTU_MANAGER)
		browser.open("/app/btu-task/new")
		browser.wait_for_text(WHO_CREATES)
		browser.wait(lambda: browser.driver.execute_script("return !!cur_frm && cur_frm.save_disabled"), "no saving")
		self.assertFalse(buttons_shown(browser, "Save"))
		browser.save()  # Ctrl+S does nothing: no form to save, no "Missing Fields"
		self.assertFalse(browser.dialog_open())
		self.assertFalse(browser.shows("Missing Fields"))

	def test_a_btu_manager_edits_a_task_but_not_its_code(self):
		task = committed_task(self, arguments='{"name": "Grace"}')
		browser = self.as_person(Person.BTU_MANAGER)
		browser.open(f"/app/btu-task/{task}")
		browser.wait_for_text(f"{SAMPLES}.say_hello")
		self.assertTrue(read_only(browser, "function_string"))
		self.assertTrue(read_only(browser, "arguments"))
		self.assertIn('"Grace"', shown(browser, "arguments"))
		note = unique("looked after by the managers")
		browser.fill("desc_long", note)
		browser.fill("max_task_duration", "45")
		save_form(browser)
		self.assertFalse(browser.dialog_open(), browser.visible_text()[-500:])
		self.assertEqual(shown(browser, "max_task_duration"), "45")
		stored = fresh_value("BTU Task", task, ["desc_long", "max_task_duration", "arguments"])
		self.assertEqual(stored, (note, 45, '{"name": "Grace"}'))

	def test_a_plain_user_is_refused_tasks(self):
		task = committed_task(self)
		browser = self.as_person(Person.PLAIN_USER)
		for path in ("/app/btu-task/new", f"/app/btu-task/{task}"):
			browser.expect_console(REFUSED_REQUEST)
			browser.open(path)
			text = refused(browser)
			self.assertNotIn(f"{SAMPLES}.say_hello", text)
			self.assertNotIn(WHO_CREATES, text)

	# -- the Run menu ----------------------------------------------------------------------------------------------

	def test_managers_run_a_task_on_the_web_server(self):
		task = committed_task(self, arguments='{"name": "Ada"}')
		for person in (Person.SYSTEM_MANAGER, Person.BTU_MANAGER):
			browser = self.as_person(person)
			browser.open(f"/app/btu-task/{task}")
			browser.click_button("Run on Web Server", "Run")
			text = browser.dialog_text()
			self.assertIn("The task runs inside this web request; the page waits until it ends.", text)
			self.assertIn("on the web server now?", text)
			browser.click_button("Yes")
			log = alert_matching(browser, r"Succeeded in [\d.]+ s, log (BTLOG-\d+)").group(1)
			self.assertEqual(fresh_value("BTU Task Log", log, ["task", "status"]), (task, "Succeeded"))

	def test_run_via_worker_then_read_its_log(self):
		task = committed_task(self, arguments='{"name": "Ada"}', queue_name="long")
		browser = self.as_person(Person.SYSTEM_MANAGER)
		browser.open(f"/app/btu-task/{task}")
		browser.click_button("Run via Worker", "Run")
		# The job's id is "<site>::<uuid>" on v15, "<site>||<uuid>" on v16.
		job_id = alert_matching(browser, r"Queued on long as job (\S+(::|\|\|)[-0-9a-f]{36})").group(1)
		perform_job(job_id)
		log = browser.wait(lambda: fresh_value("BTU Task Log", {"task": task, "rq_job_id": job_id}), "the run's Log")
		browser.click_button("View Logs")
		browser.wait(lambda: browser.route().startswith("List/BTU Task Log"), "the Task's Logs")
		open_list_row(browser, log)
		self.assertEqual(shown(browser, "status"), "Succeeded")
		browser.wait_for_text("hello Ada!")  # Standard Output
		self.assertEqual(json.loads(browser.value("result_message")), {"greeted": "Ada"})
		browser.wait_for_text('"greeted": "Ada"')  # Return Value

	def test_run_once_at_fires_at_the_moment_typed_in_the_persons_zone(self):
		"""The person's zone (Tokyo) is not the system's (New York): the one-off schedule runs at the moment typed on
		Tokyo's clock, stored on New York's (as Frappe stores every Datetime), and the form shows it on Tokyo's."""
		task = committed_task(self)
		in_zone(self, Person.BTU_MANAGER, "Asia/Tokyo")
		browser = self.as_person(Person.BTU_MANAGER)
		browser.open(f"/app/btu-task/{task}")
		browser.click_button("Run Once At...", "Run")
		browser.wait_for_text("Creates an enabled one-off schedule")
		self.assertIn("Asia/Tokyo", browser.dialog_text())  # the Datetime control names the zone it takes
		tokyo_now = datetime.now(ZoneInfo("Asia/Tokyo")).replace(tzinfo=None)
		offered = shown(browser, "at")
		self.assertTrue(
			tokyo_now + timedelta(minutes=4)
			<= datetime.strptime(offered, datetime_pattern())
			<= tokyo_now + timedelta(minutes=6),
			f"the default {offered} is not five minutes from now on the person's clock ({tokyo_now})",
		)
		typed = (tokyo_now + timedelta(days=1)).replace(hour=9, minute=30, second=0, microsecond=0)
		moment = typed.replace(tzinfo=ZoneInfo("Asia/Tokyo")).astimezone(ZoneInfo(frappe.utils.get_system_timezone()))
		browser.fill("at", typed_datetime(typed), blur=False)  # Escape would close the dialog
		browser.click_shown(By.CSS_SELECTOR, ".modal.show .modal-title")  # leaves the field
		# What the dialog sends: the typed moment on the system's clock.
		system_text = moment.strftime("%Y-%m-%d %H:%M:%S")
		browser.wait(
			lambda: browser.driver.execute_script("return cur_dialog.get_value('at')") == system_text,
			f"the dialog to take {system_text} on the system's clock",
		)
		browser.click_button("Create Schedule")
		schedule = alert_matching(browser, r"Schedule (\S+): \S").group(1)
		browser.wait(lambda: browser.route() == f"Form/BTU Task Schedule/{schedule}", "the new schedule's form")
		self.assertEqual(shown(browser, "run_at"), typed_datetime(typed))
		stored = fresh_value("BTU Task Schedule", schedule, ["task", "run_frequency", "enabled", "run_at"])
		self.assertEqual(stored, (task, "Once", 1, moment.replace(tzinfo=None)))


def delete_tasks_titled(title: str) -> None:
	frappe.db.rollback()
	for name in frappe.get_all("BTU Task", filters={"desc_short": title}, pluck="name"):
		frappe.db.delete("BTU Task Log", {"task": name})
		frappe.delete_doc("BTU Task", name, force=True, ignore_permissions=True)
	frappe.db.commit()
