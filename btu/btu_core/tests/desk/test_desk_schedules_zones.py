"""The moments a person types on the schedule form and in Backfill, with three different zones: the person's
(Asia/Tokyo, shown under each Datetime field), the system's (America/New_York, the clock Frappe stores Datetimes on)
and the schedule's (Europe/London, its recurrence only). What is typed is the moment in the person's zone."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone
from zoneinfo import ZoneInfo

import frappe

from btu.btu_core.tests.desk import forms, records
from btu.btu_core.tests.desk import schedule_steps as steps
from btu.btu_core.tests.desk.case import DeskTestCase
from btu.btu_core.tests.desk.people import LOGINS, Person

PERSON_ZONE, SYSTEM_ZONE, SCHEDULE_ZONE = "Asia/Tokyo", "America/New_York", "Europe/London"
PERSON = Person.BTU_MANAGER
HEAD = ["#", f"{SCHEDULE_ZONE} (schedule)", f"{PERSON_ZONE} (you)", "UTC", ""]


def in_person_zone(wall: str) -> datetime:
	"""A wall time in the person's zone, as an aware moment."""
	return datetime.fromisoformat(wall).replace(tzinfo=ZoneInfo(PERSON_ZONE))


def on_system_clock(moment: datetime) -> str:
	"""The moment as Frappe stores a Datetime: the system zone's wall clock."""
	return moment.astimezone(ZoneInfo(SYSTEM_ZONE)).strftime("%Y-%m-%d %H:%M:%S")


def utc_text(moment: datetime) -> str:
	return moment.astimezone(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def set_time_zone(email: str, zone: str) -> None:
	user = frappe.get_doc("User", email)
	user.time_zone = zone
	user.save(ignore_permissions=True)
	frappe.db.commit()


class TestScheduleZones(DeskTestCase):
	@classmethod
	def setUpClass(cls):
		super().setUpClass()
		# Before the person's browser logs in: the Desk reads the person's zone when it boots.
		set_time_zone(LOGINS[PERSON].email, PERSON_ZONE)
		system_zone = frappe.db.get_single_value("System Settings", "time_zone")
		assert system_zone == SYSTEM_ZONE, f"the site's zone is {system_zone}, not {SYSTEM_ZONE} (before_tests sets it)"

	@classmethod
	def tearDownClass(cls):
		set_time_zone(LOGINS[PERSON].email, "")
		super().tearDownClass()

	def setUp(self):
		super().setUp()
		self.label = records.unique("Desk zones")
		self.task = records.committed_task(self, desc_short=self.label)
		self.browser = self.as_person(PERSON)

	def stored(self, name: str, fieldname: str) -> str:
		frappe.db.rollback()
		return str(frappe.db.get_value("BTU Task Schedule", name, fieldname))

	def new_form(self, frequency: str) -> None:
		steps.open_new(self.browser)
		self.browser.link("task", self.label)
		self.browser.fill("time_zone", SCHEDULE_ZONE)
		self.browser.choose("run_frequency", frequency)

	def type_moment(self, fieldname: str, wall: str) -> None:
		"""Type `wall` (ISO) into a Datetime field as the person does, having read the zone named under it."""
		self.assertEqual(forms.field_description(self.browser, fieldname).splitlines()[-1], PERSON_ZONE)
		forms.fill_datetime(self.browser, fieldname, datetime.fromisoformat(wall))

	def assert_preview(self, fires: list[datetime]) -> None:
		"""The preview names the schedule's zone and the person's ("you"), and shows `fires` in each and in UTC."""
		self.assertEqual(steps.preview_head(self.browser), HEAD)
		shown = [row[1:4] for row in steps.preview_rows(self.browser)]
		expected = [
			[
				fire.astimezone(ZoneInfo(SCHEDULE_ZONE)).strftime("%a %Y-%m-%d %H:%M:%S %Z"),
				fire.astimezone(ZoneInfo(PERSON_ZONE)).strftime("%a %Y-%m-%d %H:%M:%S %Z"),
				utc_text(fire),
			]
			for fire in fires
		]
		self.assertEqual(shown[: len(expected)], expected)

	def assert_shown(self, name: str, fieldname: str, wall: str) -> None:
		"""The saved schedule, opened again, shows `wall` in the field, with the person's zone under it. Opened again:
		Frappe v16's Datetime control may show an empty input after a first value is typed and left (its calendar
		keeps no selection and rewrites the input from it); the value itself is kept and saved."""
		steps.open_saved(self.browser, name)
		self.assertEqual(forms.shown(self.browser, fieldname), forms.typed_datetime(datetime.fromisoformat(wall)))
		self.assertEqual(forms.field_description(self.browser, fieldname).splitlines()[-1], PERSON_ZONE)

	def test_run_at_is_the_moment_typed_in_the_persons_zone(self):
		self.new_form("Once")
		self.type_moment("run_at", "2030-01-15 09:30:00")
		self.browser.save()
		name = steps.saved_name(self.browser)
		moment = in_person_zone("2030-01-15 09:30:00")
		self.assertEqual(self.stored(name, "run_at"), on_system_clock(moment))
		self.assert_shown(name, "run_at", "2030-01-15 09:30:00")
		self.assertEqual(forms.shown(self.browser, "schedule_description"),
			"Once, at 2030-01-15 00:30:00 (Europe/London)")  # fmt: skip
		self.assert_preview([moment])
		self.assertEqual(len(steps.preview_rows(self.browser)), 1)

	def test_start_is_the_moment_typed_in_the_persons_zone(self):
		self.new_form("Hourly")
		self.browser.fill("minute", "0")
		self.type_moment("start_time", "2030-01-10 09:30:00")
		self.browser.save()
		name = steps.saved_name(self.browser)
		self.assertEqual(self.stored(name, "start_time"), on_system_clock(in_person_zone("2030-01-10 09:30:00")))
		self.assert_shown(name, "start_time", "2030-01-10 09:30:00")
		# The first fire on the hour after 09:30 in Tokyo: 10:00 there, 01:00 in London and UTC.
		first = in_person_zone("2030-01-10 10:00:00")
		self.assert_preview([first + timedelta(hours=n) for n in range(10)])
		self.browser.screenshot("schedule-zones-preview")

	def test_end_is_the_moment_typed_in_the_persons_zone(self):
		start = in_person_zone("2030-01-10 09:30:00")
		name = steps.make_schedule(
			self.task, run_frequency="Hourly", minute=0, time_zone=SCHEDULE_ZONE, start_time=on_system_clock(start)
		)
		steps.open_saved(self.browser, name)
		# The stored start, on New York's clock, shown on the person's.
		self.assertEqual(forms.shown(self.browser, "start_time"), forms.typed_datetime(datetime(2030, 1, 10, 9, 30)))
		self.type_moment("end_time", "2030-01-10 12:30:00")
		self.browser.save()
		steps.saved_name(self.browser)
		self.browser.wait(lambda: len(steps.preview_rows(self.browser)) == 3, "the fires up to the end")
		self.assertEqual(self.stored(name, "end_time"), on_system_clock(in_person_zone("2030-01-10 12:30:00")))
		self.assert_preview([in_person_zone(f"2030-01-10 {hour}:00:00") for hour in (10, 11, 12)])
		self.assert_shown(name, "end_time", "2030-01-10 12:30:00")

	def backfill(self, start: datetime, end: datetime) -> tuple[str, list[str]]:
		"""Backfill an hourly schedule from `start` to `end` (wall times in the person's zone) through the dialog; the
		result's text and the slots requested, soonest first."""
		name = steps.make_schedule(self.task, run_frequency="Hourly", minute=0, time_zone=SCHEDULE_ZONE)
		steps.open_saved(self.browser, name)
		self.browser.click_button("Backfill", group="Actions")
		forms.dialog_titled(self.browser, f"Backfill {name}")
		for fieldname, wall in (("start", start), ("end", end)):
			self.assertEqual(forms.field_description(self.browser, fieldname), PERSON_ZONE)
			forms.fill_datetime(self.browser, fieldname, wall)
		forms.dialog_primary(self.browser)
		text = forms.dialog_titled(self.browser, f"Backfill of {name}")
		forms.close_dialog(self.browser, f"Backfill of {name}")
		frappe.db.rollback()
		slots = frappe.get_all("BTU Run Request", filters={"schedule": name}, pluck="slot_utc", order_by="slot_utc asc")
		return text, slots

	def test_backfill_from_is_the_moment_typed_in_the_persons_zone(self):
		# 09:30 in Tokyo is 00:30 UTC: the first hourly slot is 01:00 UTC (in New York's or London's zone it would
		# be 15:00 or 10:00 UTC). The end, a day later, leaves the first slot to the start alone.
		day = (datetime.now(ZoneInfo(PERSON_ZONE)) - timedelta(days=30)).date()
		start = datetime.combine(day, datetime.min.time()).replace(hour=9, minute=30)
		text, slots = self.backfill(start, start + timedelta(days=1))
		self.assertIn("24 slots in the range: 24 requested, 0 requested before, 0 ran already.", text)
		self.assertEqual(slots[0], f"{day.isoformat()}T01:00:00Z")
		self.assertEqual(len(slots), 24)

	def test_backfill_to_is_the_moment_typed_in_the_persons_zone(self):
		# 12:30 in Tokyo is 03:30 UTC: the last hourly slot is 03:00 UTC. The start, a day earlier, leaves the last
		# slot to the end alone.
		day = (datetime.now(ZoneInfo(PERSON_ZONE)) - timedelta(days=30)).date()
		end = datetime.combine(day, datetime.min.time()).replace(hour=12, minute=30)
		text, slots = self.backfill(end - timedelta(days=1), end)
		self.assertIn("24 slots in the range: 24 requested, 0 requested before, 0 ran already.", text)
		self.assertEqual(slots[-1], f"{day.isoformat()}T03:00:00Z")
		self.assertEqual(len(slots), 24)
