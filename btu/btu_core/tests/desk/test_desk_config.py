"""BTU Configuration (its scheduler status panel and buttons), BTU Calendars, and alert rules with their test message
and incidents, in a real browser, as each person sees them.

No scheduler answers this site during the class: its BTU keys are put under a namespace of their own (btu_namespace
in the site's config) for the class's life, so a scheduler another test runs on the bench's Redis is not seen, as on a
bench where none was started.
"""

from __future__ import annotations

import frappe
from frappe.utils import now_datetime
from selenium.common.exceptions import (
	ElementClickInterceptedException,
	ElementNotInteractableException,
	StaleElementReferenceException,
)
from selenium.webdriver.common.keys import Keys

from btu.btu_core.tests.desk.case import Desk, DeskTestCase
from btu.btu_core.tests.desk.forms import (
	add_row,
	check_in_row,
	close_dialog,
	close_row,
	dialog_titled,
	open_calendar,
	open_form,
	open_section,
	read_only,
	refused,
	row_input,
	row_values,
	save_form,
	user_date,
)
from btu.btu_core.tests.desk.people import LOGINS, Person
from btu.btu_core.tests.desk.records import (
	committed_task,
	fresh_single,
	restore_single,
	unique,
)
from btu.btu_core.tests.utils import make_schedule, site_config

CONFIGURATION = "/app/btu-configuration"
MANAGERS = (Person.SYSTEM_MANAGER, Person.BTU_MANAGER)
NO_ANSWER = "The BTU Scheduler did not respond within 5 seconds"


class TestConfiguration(DeskTestCase):
	@classmethod
	def setUpClass(cls):
		cls.enterClassContext(site_config(btu_namespace=f"btu-desk-{frappe.generate_hash(length=8)}"))
		super().setUpClass()
		cls.server = Desk.new_server()
		# A schedule (disabled) for Resync All Schedules to send.
		cls.task = committed_task(cls, desc_short="desk configuration")
		make_schedule(cls.task)
		frappe.db.commit()

	def test_managers_are_told_no_scheduler_runs(self):
		for person in MANAGERS:
			with self.subTest(person=person):
				browser = self.as_person(person)
				open_form(browser, CONFIGURATION, "BTU Configuration")
				browser.wait_for_texts("Scheduler Status", "No scheduler status in Redis.", "bench btu-scheduler")
				browser.click_button("Refresh Status")
				browser.wait_for_texts("No scheduler status in Redis.")
				if person is Person.SYSTEM_MANAGER:
					browser.screenshot("configuration_status")

	def test_ping_and_resync_say_that_no_scheduler_answered(self):
		for person in MANAGERS:
			with self.subTest(person=person):
				browser = self.as_person(person)
				open_form(browser, CONFIGURATION, "BTU Configuration")
				browser.click_button("Ping Scheduler")
				self.assertIn(NO_ANSWER, dialog_titled(browser, "BTU Scheduler"))
				close_dialog(browser)
				browser.click_button("Resync All Schedules")
				text = dialog_titled(browser, "Resync")
				self.assertRegex(text, r"Sent 1 of \d+\.")
				self.assertIn(NO_ANSWER, text)
				close_dialog(browser)

	def test_only_a_system_manager_sets_the_environment_name_frappe_s_jobs_and_retention(self):
		restore_single(self, "BTU Configuration", "environment_name", "default_catch_up_window")
		name = unique("Desk QA")
		browser = self.as_person(Person.SYSTEM_MANAGER)
		open_form(browser, CONFIGURATION, "BTU Configuration")
		self.assertFalse(read_only(browser, "environment_name"))
		self.assertFalse(read_only(browser, "log_retention_days"))
		browser.fill("environment_name", name, blur=False)  # Tab would go on into the recipients
		save_form(browser)
		self.assertEqual(browser.value("environment_name"), name)
		self.assertEqual(fresh_single("BTU Configuration", "environment_name"), name)

		browser = self.as_person(Person.BTU_MANAGER)
		open_form(browser, CONFIGURATION, "BTU Configuration")
		browser.wait_for_texts(name)  # shown, as a value
		self.assertTrue(read_only(browser, "environment_name"))
		self.assertTrue(read_only(browser, "fire_frappe_jobs"))
		self.assertTrue(read_only(browser, "log_retention_days"))  # who shortens it deletes
		browser.fill("default_catch_up_window", "1800", blur=False)  # what a BTU Manager may set
		save_form(browser)
		self.assertEqual(fresh_single("BTU Configuration", "default_catch_up_window"), "1800")
		self.assertEqual(fresh_single("BTU Configuration", "environment_name"), name)

	def test_a_btu_manager_makes_a_calendar_of_dates(self):
		browser = self.as_person(Person.BTU_MANAGER)
		name = unique("Desk holidays")
		self.addCleanup(self.remove, "BTU Calendar", name)
		open_form(browser, "/app/btu-calendar/new", "BTU Calendar")
		browser.fill("calendar_name", name)
		for day, description in (("2026-12-25", "Christmas"), ("2027-01-01", "New Year")):
			row = add_row(browser, "dates")
			date = row_input(browser, row, "date")
			open_calendar(browser, date)
			browser.type_into(date, user_date(browser, day))
			date.send_keys(Keys.TAB)  # on to the description (Escape would close the row)
			browser.wait(lambda day=day: row_values(browser, "dates", "date")[-1:] == [day], f"the row to hold {day}")
			browser.type_into(row_input(browser, row, "description"), description)
			close_row(browser)
		save_form(browser)
		browser.wait(lambda: browser.route() == f"Form/BTU Calendar/{name}", "the saved calendar")
		browser.wait_for_texts(user_date(browser, "2026-12-25"), "Christmas", user_date(browser, "2027-01-01"))
		frappe.db.rollback()  # to read what the web server committed
		dates = frappe.get_all("BTU Calendar Date", {"parent": name}, ["date", "description"], order_by="idx")
		self.assertEqual(
			[(str(d.date), d.description) for d in dates], [("2026-12-25", "Christmas"), ("2027-01-01", "New Year")]
		)
		browser.open("/app/btu-calendar")
		browser.wait_for_texts(name)

	def test_a_btu_manager_adds_an_alert_rule_and_sends_a_test(self):
		email = LOGINS[Person.BTU_MANAGER].email
		task = committed_task(self, desc_short=unique("desk alerts"))
		self.addCleanup(self.remove_notifications, task)
		browser = self.as_person(Person.BTU_MANAGER)
		open_form(browser, f"/app/btu-task/{task}", "BTU Task")
		open_section(browser, "Alerts")
		row = add_row(browser, "alert_rules")
		browser.wait(lambda: row_input(browser, row, "by_email").is_selected(), "Email ticked, as rules start")
		check_in_row(browser, row, "by_email", False)  # no outgoing mail on a test site
		check_in_row(browser, row, "by_bell", True)
		browser.type_into(row_input(browser, row, "recipients"), email)
		close_row(browser)
		save_form(browser)
		frappe.db.rollback()
		self.assertEqual(frappe.db.get_value("BTU Alert Rule", {"parent": task}, "recipients"), email)
		browser.click_button("Test an Alert Rule...", group="Alerts")
		dialog_titled(browser, "Test an Alert Rule")
		browser.click_button("Send")
		text = dialog_titled(browser, "Test alert sent")
		self.assertIn(f"Desk notification sent to: {email}", text)
		self.assertNotIn("Email sent to", text)  # the rule's Email is unticked
		close_dialog(browser)
		frappe.db.rollback()
		self.assertTrue(frappe.db.exists("Notification Log", {"for_user": email, "document_name": task}))

	def test_a_btu_manager_sees_the_open_incidents(self):
		task = committed_task(self, desc_short=unique("desk incidents"))
		incident = frappe.get_doc(
			{
				"doctype": "BTU Alert Incident",
				"status": "Open",
				"kind": "Failure",
				"task": task,
				"opened_at": now_datetime(),
				"occurrences": 2,
				"last_message": "desk test: the task failed twice",
			}
		).insert(ignore_permissions=True)
		frappe.db.commit()
		browser = self.as_person(Person.BTU_MANAGER)
		browser.open("/app/btu-alert-incident")
		browser.wait_for_texts(incident.name, "Open")

	def test_a_user_without_a_btu_role_is_refused(self):
		browser = self.as_person(Person.PLAIN_USER)
		for path in (CONFIGURATION, "/app/btu-calendar", "/app/btu-alert-incident"):
			with self.subTest(path=path):
				refused(browser, path)
				self.assertFalse(browser.shows("Ping Scheduler"))

	@staticmethod
	def remove(doctype: str, name: str) -> None:
		frappe.db.rollback()
		frappe.delete_doc(doctype, name, force=True, ignore_permissions=True, ignore_missing=True)
		frappe.db.commit()

	@staticmethod
	def remove_notifications(task: str) -> None:
		frappe.db.rollback()
		frappe.db.delete("Notification Log", {"document_type": "BTU Task", "document_name": task})
		frappe.db.commit()
