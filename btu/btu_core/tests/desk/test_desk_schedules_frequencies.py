"""A schedule of each frequency created on the Desk's new-schedule form, as the System Manager and as the BTU Manager:
what the saved form shows (the values, the Schedule description, the cron, the Next Fires table)."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta

import frappe

from btu.btu_core.tests.desk import forms, records
from btu.btu_core.tests.desk import schedule_steps as steps
from btu.btu_core.tests.desk.case import DeskTestCase
from btu.btu_core.tests.desk.people import Person

SYSTEM_ZONE = "America/New_York"  # the site's zone after run-tests' before_tests, and so each person's here


@dataclass(frozen=True)
class Frequency:
	name: str
	zone: str
	fields: tuple[tuple[str, str], ...]  # (fieldname, what the person types or picks), in the form's order
	cron: str  # what the Cron String field shows ("" where it is hidden)
	description: str
	fire: str  # a pattern every fire's cell in the schedule's zone matches
	apart: timedelta | None = None  # between consecutive fires, where that is fixed


FREQUENCIES = (
	Frequency(
		"Hourly", "Africa/Nairobi", (("minute", "15"),), "15 * * * *",  # a zone without DST: always an hour apart
		"At 15 minutes past the hour (Africa/Nairobi)", r"\d\d:15:00 EAT$", timedelta(hours=1),
	),
	Frequency(
		"Daily", "Asia/Kolkata", (("minute", "45"), ("hour", "6")), "45 6 * * *",
		"At 06:45 AM (Asia/Kolkata)", r"06:45:00 IST", timedelta(days=1),
	),
	Frequency(
		"Weekly", "America/Chicago", (("minute", "30"), ("hour", "7"), ("day_of_week", "Wednesday")), "30 7 * * 3",
		"At 07:30 AM, only on Wednesday (America/Chicago)", r"^Wed .* 07:30:00 C[SD]T",
	),
	Frequency(
		"Monthly", "Australia/Sydney", (("minute", "5"), ("hour", "8"), ("day_of_month", "15")), "5 8 15 * *",
		"At 08:05 AM, on day 15 of the month (Australia/Sydney)", r"-15 08:05:00 AE[SD]T",
	),
	Frequency(
		"Yearly", "Europe/Paris",
		(("minute", "10"), ("hour", "9"), ("day_of_month", "2"), ("month", "March")), "10 9 2 3 *",
		"At 09:10 AM, on day 2 of the month, only in March (Europe/Paris)", r"-03-02 09:10:00 CET",
	),
	Frequency(
		"Cron Style", "Asia/Tokyo", (("cron_string", "*/20 9-17 * * 1-5"),), "*/20 9-17 * * 1-5",
		"Every 20 minutes, between 09:00 AM and 05:59 PM, Monday through Friday (Asia/Tokyo)",
		r"^(Mon|Tue|Wed|Thu|Fri) .* (09|1[0-7]):[024]0:00 JST",
	),
	Frequency(
		"Interval", "UTC", (("every", "90"), ("every_unit", "Minutes"), ("start_time", "2030-01-01 00:00:00")), "",
		"Every 90 minutes, from 2030-01-01 05:00:00 (UTC)", r"^Tue 2030-01-01 .* UTC", timedelta(minutes=90),
	),
	Frequency(
		"Once", "Europe/London", (("run_at", "2030-01-15 09:30:00"),), "",
		"Once, at 2030-01-15 14:30:00 (Europe/London)", r"^Tue 2030-01-15 14:30:00 GMT$",
	),
)  # fmt: skip
DATETIMES = ("start_time", "run_at")


class TestScheduleFrequencies(DeskTestCase):
	def setUp(self):
		super().setUp()
		self.label = records.unique("Desk frequencies")
		self.task = records.committed_task(self, desc_short=self.label)

	def test_the_system_manager_creates_a_schedule_of_each_frequency(self):
		self.create_each(Person.SYSTEM_MANAGER)

	def test_the_btu_manager_creates_a_schedule_of_each_frequency(self):
		self.create_each(Person.BTU_MANAGER)

	def create_each(self, person: Person) -> None:
		browser = self.as_person(person)
		for frequency in FREQUENCIES:
			with self.subTest(frequency=frequency.name):
				steps.open_new(browser)
				browser.link("task", self.label)
				browser.fill("time_zone", frequency.zone)
				browser.choose("run_frequency", frequency.name)
				for fieldname, value in frequency.fields:
					if fieldname in DATETIMES:
						forms.fill_datetime(browser, fieldname, datetime.fromisoformat(value))
					else:
						browser.fill(fieldname, value)
				browser.save()
				name = steps.saved_name(browser)
				self.assert_saved_form(browser, frequency)
				if frequency.name == "Weekly" and person is Person.BTU_MANAGER:
					browser.screenshot("task_schedule_preview")
				self.assert_stored(name, frequency)

	def assert_saved_form(self, browser, frequency: Frequency) -> None:
		self.assertEqual(forms.shown(browser, "task"), self.label)
		self.assertEqual(forms.shown(browser, "run_frequency"), frequency.name)
		self.assertEqual(forms.shown(browser, "time_zone"), frequency.zone)
		for fieldname, value in frequency.fields:
			if fieldname not in DATETIMES:
				self.assertEqual(forms.shown(browser, fieldname), value, fieldname)
		if frequency.cron:
			self.assertEqual(forms.shown(browser, "cron_string"), frequency.cron)
		self.assertEqual(forms.shown(browser, "schedule_description"), frequency.description)
		self.assertIn(frequency.description, steps.preview_text(browser))
		self.assertEqual(
			steps.preview_head(browser), ["#", f"{frequency.zone} (schedule)", f"{SYSTEM_ZONE} (you)", "UTC", ""]
		)
		rows = steps.preview_rows(browser)
		self.assertEqual(len(rows), 1 if frequency.name == "Once" else 10, rows)
		for number, row in enumerate(rows, 1):
			self.assertEqual(row[0], str(number))
			self.assertRegex(row[1], frequency.fire)
			self.assertRegex(row[2], r" E[SD]T$")
		if frequency.apart:
			moments = [datetime.fromisoformat(row[3].replace("Z", "+00:00")) for row in rows]
			self.assertEqual({later - earlier for earlier, later in zip(moments, moments[1:])}, {frequency.apart})

	def assert_stored(self, name: str, frequency: Frequency) -> None:
		frappe.db.rollback()
		doc = frappe.get_doc("BTU Task Schedule", name)
		self.assertEqual((doc.task, doc.run_frequency, doc.time_zone), (self.task, frequency.name, frequency.zone))
		self.assertEqual(doc.schedule_description, frequency.description)
		if frequency.cron:
			self.assertEqual(doc.cron_string, frequency.cron)
		for fieldname, value in frequency.fields:
			stored = doc.get(fieldname)
			self.assertEqual(str(stored), value, fieldname)
