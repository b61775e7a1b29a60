"""BTU Task Logs and BTU Run Requests in a real browser: who finds which runs, and what of them each person reads.

A Task's run is read by both managers; an app's enqueued run (`btu.enqueue_at`) by a System Manager only: its Log is
neither listed nor opened for a BTU Manager, and its request's Keyword Arguments are hidden from them (docs/SECURITY.md,
"Roles and actions").
"""

from __future__ import annotations

import json
from datetime import timedelta

import frappe

import btu
from btu.btu_core.instants import utc_now
from btu.btu_core.runs import backfills, run_requests
from btu.btu_core.runs.task_run import run_in_this_process
from btu.btu_core.task_runner import run_request
from btu.btu_core.tests.desk.case import DeskTestCase
from btu.btu_core.tests.desk.forms import (
	REFUSED_REQUEST,
	list_shows,
	open_list_row,
	refused,
	shown,
)
from btu.btu_core.tests.desk.people import Person
from btu.btu_core.tests.desk.records import (
	committed_task,
	fresh_value,
	unique,
)
from btu.btu_core.tests.utils import SAMPLES, make_schedule

NO_LOGS = "No BTU Task Log found with matching filters"


class TestRunsInTheDesk(DeskTestCase):
	# -- Task Logs -------------------------------------------------------------------------------------------------

	def test_managers_find_a_task_runs_log_from_its_task_and_read_its_output(self):
		task = committed_task(self, arguments='{"name": "Ada"}')
		log = committed_run(task)
		other_log = committed_run(committed_task(self))
		for person in (Person.SYSTEM_MANAGER, Person.BTU_MANAGER):
			browser = self.as_person(person)
			browser.open(f"/app/btu-task/{task}")
			browser.click_button("View Logs")
			# The list may draw before it applies the Task's filter: wait for the filtered rows.
			browser.wait(
				lambda: list_shows(browser, log) and not list_shows(browser, other_log),
				f"{log} listed, without another Task's Log",
			)
			if person is Person.SYSTEM_MANAGER:
				browser.screenshot("task_log_list")
			open_list_row(browser, log)
			self.assertEqual(shown(browser, "status"), "Succeeded")
			self.assertEqual(shown(browser, "task"), fresh_value("BTU Task", task, "desc_short"))
			browser.wait_for_text("hello Ada!")  # Standard Output
			browser.wait_for_text("warning for Ada")  # Standard Error
			self.assertEqual(json.loads(browser.value("result_message")), {"greeted": "Ada"})
			browser.wait_for_text('"greeted": "Ada"')  # Return Value
			if person is Person.SYSTEM_MANAGER:
				browser.screenshot("task_log_output")

	def test_only_a_system_manager_reads_an_enqueued_runs_log(self):
		log = self.enqueued_run_log(name="Enqueued")
		browser = self.as_person(Person.SYSTEM_MANAGER)
		browser.open("/app/btu-task-log?origin=Enqueue")
		browser.wait(lambda: list_shows(browser, log), f"{log} listed")
		open_list_row(browser, log)
		self.assertEqual(shown(browser, "method"), f"{SAMPLES}.say_hello")
		self.assertEqual(shown(browser, "status"), "Succeeded")
		browser.wait_for_text("hello Enqueued!")
		browser.wait_for_text('"greeted": "Enqueued"')

		manager = self.as_person(Person.BTU_MANAGER)
		manager.open("/app/btu-task-log?origin=Enqueue")
		manager.wait_for_text(NO_LOGS)
		self.assertFalse(list_shows(manager, log))
		manager.expect_console(REFUSED_REQUEST)
		manager.open(f"/app/btu-task-log/{log}")
		manager.wait_for_text("Not permitted")
		manager.wait_for_text(log)  # names what was refused
		self.assertFalse(manager.shows("hello Enqueued!"))

	def test_a_plain_user_is_refused_task_logs(self):
		log = committed_run(committed_task(self))
		browser = self.as_person(Person.PLAIN_USER)
		for path in ("/app/btu-task-log", f"/app/btu-task-log/{log}"):
			browser.expect_console(REFUSED_REQUEST)
			browser.open(path)
			self.assertNotIn("hello world!", refused(browser))

	def enqueued_run_log(self, **kwargs) -> str:
		"""The Log of a function an app enqueued with btu.enqueue_at(..., task_log=True), run as the scheduler's job
		runs it."""
		frappe.set_user("Administrator")
		request = btu.enqueue_at(f"{SAMPLES}.say_hello", utc_now(), task_log=True, **kwargs)
		frappe.db.commit()
		self.addCleanup(delete_requests, request)
		run_request(request, None, None)
		frappe.db.commit()
		return frappe.db.get_value("BTU Task Log", {"run_request": request})

	# -- Run Requests ----------------------------------------------------------------------------------------------

	def test_only_a_system_manager_reads_an_enqueued_requests_keyword_arguments(self):
		secret = unique("kept from the BTU Manager")
		frappe.set_user("Administrator")
		request = btu.enqueue_at(f"{SAMPLES}.note_call", utc_now() + timedelta(days=1), marker="desk", value=secret)
		frappe.db.commit()
		self.addCleanup(delete_requests, request)
		for person in (Person.SYSTEM_MANAGER, Person.BTU_MANAGER):
			browser = self.as_person(person)
			browser.open("/app/btu-run-request?origin=Enqueue&status=Pending")
			browser.wait(lambda: list_shows(browser, request), f"{request} listed")
			open_list_row(browser, request)
			self.assertEqual(shown(browser, "status"), "Pending")
			self.assertEqual(shown(browser, "origin"), "Enqueue")
			self.assertEqual(shown(browser, "method"), f"{SAMPLES}.note_call")
			if person is Person.SYSTEM_MANAGER:
				self.assertEqual(json.loads(shown(browser, "kwargs")), {"marker": "desk", "value": secret})
			else:
				self.assertFalse(browser.shows("Keyword Arguments"))
				self.assertFalse(browser.shows(secret))

	def test_managers_read_a_backfill_and_a_btu_manager_cancels_it(self):
		task = committed_task(self)
		frappe.set_user("Administrator")
		schedule = make_schedule(task)  # daily at 02:30 UTC, disabled
		now = utc_now()
		requested = backfills.backfill(schedule, now - timedelta(days=3), now - timedelta(hours=1))["requested"]
		frappe.db.commit()
		first, waiting = requested[0], requested[1:]
		self.assertTrue(waiting)
		for person in (Person.SYSTEM_MANAGER, Person.BTU_MANAGER):
			browser = self.as_person(person)
			browser.open(f"/app/btu-task/{task}")
			browser.click_button("Pending Runs")
			for name in requested:
				browser.wait(lambda name=name: list_shows(browser, name), f"{name} listed")
			browser.wait_for_text("Waiting")
			open_list_row(browser, first)
			self.assertEqual(shown(browser, "status"), "Pending")
			self.assertEqual(shown(browser, "origin"), "Backfill")
			self.assertIn(f"Backfill {fresh_value('BTU Run Request', first, 'backfill')}", shown(browser, "note"))
		manager = self.as_person(Person.BTU_MANAGER)  # on the first request's form
		manager.click_button("Cancel Run")
		manager.wait(lambda: shown(manager, "status") == "Cancelled", "the request shown Cancelled")
		self.assertEqual({fresh_value("BTU Run Request", name, "status") for name in requested}, {"Cancelled"})

	def test_a_plain_user_is_refused_run_requests(self):
		frappe.set_user("Administrator")
		request = btu.enqueue_at(f"{SAMPLES}.note_call", utc_now() + timedelta(days=1), marker="desk")
		frappe.db.commit()
		self.addCleanup(delete_requests, request)
		browser = self.as_person(Person.PLAIN_USER)
		for path in ("/app/btu-run-request", f"/app/btu-run-request/{request}"):
			browser.expect_console(REFUSED_REQUEST)
			browser.open(path)
			self.assertNotIn(f"{SAMPLES}.note_call", refused(browser))


def committed_run(task: str) -> str:
	"""A Task's run (as Run on Web Server runs it), committed: its Log's name."""
	frappe.set_user("Administrator")
	log = run_in_this_process(task).name
	frappe.db.commit()
	return log


def delete_requests(*names: str) -> None:
	frappe.db.rollback()
	for name in names:
		frappe.db.delete("BTU Task Log", {"run_request": name})
		frappe.db.delete("BTU Run Request", {"name": name})
	frappe.db.commit()
