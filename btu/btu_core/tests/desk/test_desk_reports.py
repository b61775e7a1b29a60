"""BTU's three reports in a real browser: each manager narrows one to this test's Task with its Task filter and reads
the row the Task Logs made; a user without a BTU role is refused readably."""

from __future__ import annotations

from datetime import datetime, time, timedelta

import frappe
from frappe.utils import getdate

from btu.btu_core.tests.desk.case import DeskTestCase
from btu.btu_core.tests.desk.forms import (
	REFUSED_REPORT,
)
from btu.btu_core.tests.desk.insight_steps import (
	report_ready,
	report_table,
)
from btu.btu_core.tests.desk.people import Person
from btu.btu_core.tests.desk.records import (
	committed_logs,
	committed_task,
	unique,
)
from btu.btu_core.tests.utils import make_schedule

MANAGERS = (Person.SYSTEM_MANAGER, Person.BTU_MANAGER)
REPORTS = ("Scheduled Task Summary", "Task Log Summary", "Task Duration Averages")


def day(days_ago: int, seconds: int = 0) -> datetime:
	"""Noon of a past day, or (0) a moment just after today's midnight: all within the reports' default periods."""
	start = datetime.combine(getdate() - timedelta(days=days_ago), time(12 if days_ago else 0))
	return start + timedelta(seconds=seconds)


class TestReports(DeskTestCase):
	@classmethod
	def setUpClass(cls):
		super().setUpClass()
		cls.description = unique("desk reports")
		cls.task = committed_task(cls, desc_short=cls.description)
		cls.schedule = make_schedule(cls.task).name  # disabled: no scheduler fires it
		frappe.db.commit()
		# Three runs of the schedule in the last days, the newest (inserted last) a success.
		committed_logs(
			cls.task,
			[
				{"started": day(2), "status": "Failed", "fire_lag_ms": 10, "seconds": 0.5},
				{"started": day(1), "fire_lag_ms": 4, "seconds": 1.5},
				{"started": day(0, 1), "fire_lag_ms": 6, "seconds": 2.5},
			],
			schedule=cls.schedule,
		)

	def open_for_task(self, person: Person, report: str) -> dict[str, str]:
		"""The report as the person opens it and narrows it to this test's Task: the Task's row, by column."""
		browser = self.as_person(person)
		browser.open(f"/app/query-report/{report}")
		report_ready(browser, report)
		if report == "Scheduled Task Summary":
			browser.check("enabled_only", False)  # the test's schedule is disabled
		browser.link("task", self.task)
		report_ready(browser, report)

		def row():
			header, rows = report_table(browser)
			found = [dict(zip(header, cells)) for cells in rows]
			return found[0] if len(found) == 1 and found[0].get("Task Description") == self.description else None

		return browser.wait(row, f"{report}'s row of {self.task}")

	def test_the_scheduled_task_summary_shows_the_schedule_and_its_last_run(self):
		for person in MANAGERS:
			with self.subTest(person=person):
				row = self.open_for_task(person, "Scheduled Task Summary")
				self.assertEqual(
					(row["Schedule"], row["Task Description"], row["Last Status"]),
					(self.schedule, self.description, "Succeeded"),
				)
				self.assertEqual((row["Runs (24 h)"], row["Failures (24 h)"]), ("3", "1"))

	def test_the_task_log_summary_counts_the_runs_by_outcome(self):
		for person in MANAGERS:
			with self.subTest(person=person):
				row = self.open_for_task(person, "Task Log Summary")
				self.assertEqual(
					(row["Schedule"], row["Runs"], row["Succeeded"], row["Failed"], row["Last Status"]),
					(self.schedule, "3", "2", "1", "Succeeded"),
				)
				self.assertEqual((row["Avg Fire Lag (ms)"], row["Max Fire Lag (ms)"]), ("6.7", "10.0"))

	def test_the_task_duration_averages_of_the_successful_runs(self):
		for person in MANAGERS:
			with self.subTest(person=person):
				row = self.open_for_task(person, "Task Duration Averages")
				self.assertEqual(
					(row["Runs"], row["Min (s)"], row["Average (s)"], row["Max (s)"], row["Limit (s)"]),
					("2", "1.500", "2.000", "2.500", "60"),
				)

	def test_a_user_without_a_btu_role_is_refused_each_report(self):
		browser = self.as_person(Person.PLAIN_USER)
		for report in REPORTS:
			with self.subTest(report=report):
				browser.expect_console(REFUSED_REPORT)
				browser.open(f"/app/query-report/{report}")
				browser.wait_for_text(f"You don't have access to Report: {report}")
				self.assertFalse(browser.shows(self.description))
