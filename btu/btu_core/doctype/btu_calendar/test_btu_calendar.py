"""Skip next runs and calendars on the Desk and over the API: what is stored, what the preview shows, who may."""

from datetime import date, datetime, timedelta, timezone
from unittest.mock import patch

import frappe
from frappe.exceptions import FrappeTypeError

from btu.btu_core import api
from btu.btu_core.schedules.preview import next_fires, render_html
from btu.btu_core.tests.utils import make_schedule, make_task, make_user
from btu.shared import protocol

try:
	from frappe.tests import IntegrationTestCase
except ImportError:
	from frappe.tests.utils import FrappeTestCase as IntegrationTestCase

PLAIN_USER = "btu-plain-user@example.com"


def make_calendar(name: str, dates: list, **values):
	if frappe.db.exists("BTU Calendar", name):
		frappe.delete_doc("BTU Calendar", name, force=True, ignore_permissions=True)
	return frappe.get_doc(
		{"doctype": "BTU Calendar", "calendar_name": name, "dates": [{"date": d} for d in dates], **values}
	).insert()


class TestSkipNextRuns(IntegrationTestCase):
	def setUp(self):
		self.task = make_task()
		self.schedule = make_schedule(self.task.name, run_frequency="Daily", hour=9, minute=0, time_zone="Europe/Paris")

	def tearDown(self):
		frappe.set_user("Administrator")

	def test_skip_and_unskip_over_the_api(self):
		upcoming = [f["utc"] for f in next_fires(self.schedule, 3)["fires"]]
		result = api.skip_next_runs(self.schedule.name, 2)
		self.assertEqual(result["skipped"], upcoming[:2])
		self.schedule.reload()
		self.assertEqual([row.slot_utc for row in self.schedule.skipped_slots], upcoming[:2])
		self.assertIn("CET", self.schedule.skipped_slots[0].slot_local)
		preview = next_fires(self.schedule, 2)  # two fires, and the skipped runs before them (at most as many)
		self.assertEqual(
			[(f["utc"], f["mark"]) for f in preview["fires"]][:3],
			[(upcoming[0], "skipped"), (upcoming[1], "skipped"), (upcoming[2], "")],
		)
		html = render_html(preview)
		self.assertIn("data-mark='skipped'", html)
		self.assertIn("line-through", html)
		# Skipping again skips the next run not skipped yet.
		self.assertEqual(api.skip_next_runs(self.schedule.name, 1)["skipped"], upcoming[2:3])

		result = api.unskip(self.schedule.name, upcoming[0])
		self.assertEqual(result["unskipped"], upcoming[0])
		self.assertEqual(result["skipped_slots"], upcoming[1:3])
		with self.assertRaises(frappe.ValidationError):
			api.unskip(self.schedule.name, upcoming[0])  # not skipped any more
		with self.assertRaises(frappe.ValidationError):
			api.unskip(self.schedule.name, "garbage")

	def test_hostile_counts_and_rows(self):
		for count in (0, -1, 101, "lots"):
			# "lots" is refused by Frappe's whitelist, against the parameter's type (FrappeTypeError, HTTP 417 too).
			with self.subTest(count=count), self.assertRaises((frappe.ValidationError, FrappeTypeError)) as caught:
				api.skip_next_runs(self.schedule.name, count)
			self.assertIn("count", str(caught.exception))
		# A row that is no slot of the schedule, and a past one, are removed on save; garbage is refused.
		self.schedule.append("skipped_slots", {"slot_utc": "2099-01-01T08:00:01Z"})
		self.schedule.append("skipped_slots", {"slot_utc": "2001-01-01T08:00:00Z"})
		self.schedule.append("skipped_slots", {"slot_utc": "2099-01-01T08:00:00Z"})
		self.schedule.append("skipped_slots", {"slot_utc": "2099-01-01T08:00:00+00:00"})
		self.schedule.save()
		self.assertEqual([row.slot_utc for row in self.schedule.skipped_slots], ["2099-01-01T08:00:00Z"])
		self.schedule.append("skipped_slots", {"slot_utc": "next tuesday"})
		with self.assertRaises(frappe.ValidationError) as caught:
			self.schedule.save()
		self.assertIn("skipped_slots", str(caught.exception))

	def test_a_skipped_run_a_catch_up_may_still_fire_is_kept_on_save(self):
		daily = make_schedule(
			self.task.name, run_frequency="Daily", hour=9, minute=0, time_zone="UTC", catch_up_window=86400
		)
		upcoming = datetime.fromisoformat(next_fires(daily, 1)["fires"][0]["utc"].replace("Z", "+00:00"))
		last, older = (upcoming - timedelta(days=days) for days in (1, 2))
		for slot in (older, last):
			daily.append("skipped_slots", {"slot_utc": slot.strftime("%Y-%m-%dT%H:%M:%SZ")})
		daily.save()
		self.assertEqual([row.slot_utc for row in daily.skipped_slots], [last.strftime("%Y-%m-%dT%H:%M:%SZ")])

	def test_ten_thousand_skips_are_refused(self):
		start = datetime(2030, 1, 1, 8, tzinfo=timezone.utc)
		for i in range(10_000):
			self.schedule.append(
				"skipped_slots", {"slot_utc": (start + timedelta(days=i)).strftime("%Y-%m-%dT%H:%M:%SZ")}
			)
		with self.assertRaises(frappe.ValidationError) as caught:
			self.schedule.save()
		self.assertIn("1000", str(caught.exception))

	def test_a_user_without_a_btu_role_is_refused(self):
		make_user(PLAIN_USER)
		frappe.set_user(PLAIN_USER)
		with self.assertRaises(frappe.PermissionError):
			api.skip_next_runs(self.schedule.name, 1)
		with self.assertRaises(frappe.PermissionError):
			api.unskip(self.schedule.name, "2099-01-01T08:00:00Z")


class TestCalendar(IntegrationTestCase):
	def setUp(self):
		self.task = make_task()

	def test_excluded_and_moved_in_the_preview(self):
		calendar = make_calendar("BTU Test Weekend", [date(2026, 12, 6), date(2026, 12, 6), date(2026, 12, 5)])
		self.assertEqual(len(calendar.dates), 2, "a date listed twice is kept once")
		weekly = make_schedule(
			self.task.name,
			run_frequency="Weekly",
			day_of_week="Sunday",
			hour=9,
			minute=0,
			time_zone="Europe/Paris",
			calendar=calendar.name,
			calendar_policy="Move to next working day",
		)
		preview = next_fires(weekly, 2, after=datetime(2026, 12, 1, tzinfo=timezone.utc))
		marks = [(f["utc"], f["mark"], f["note"]) for f in preview["fires"]]
		self.assertEqual(marks[0], ("2026-12-06T08:00:00Z", "excluded", "excluded (calendar)"))
		self.assertEqual(marks[1], ("2026-12-07T08:00:00Z", "moved", "moved from Sun 2026-12-06"))
		self.assertIn("moved from Sun 2026-12-06", render_html(preview))
		weekly.calendar_policy = "Skip excluded days"
		weekly.save()
		preview = next_fires(weekly, 1, after=datetime(2026, 12, 1, tzinfo=timezone.utc))
		self.assertEqual([f["utc"] for f in preview["fires"] if not f["mark"]], ["2026-12-13T08:00:00Z"])

	def test_saving_a_calendar_announces_its_enabled_schedules(self):
		calendar = make_calendar("BTU Test Plant", [date(2026, 12, 25)])
		on = make_schedule(self.task.name, enabled=1, calendar=calendar.name)
		make_schedule(self.task.name, enabled=0, calendar=calendar.name)
		make_schedule(self.task.name, enabled=1)
		with patch("btu.btu_core.schedules.calendars.announce_after_commit") as announce:
			calendar.append("dates", {"date": date(2026, 12, 26)})
			calendar.save()
		self.assertEqual([c.args for c in announce.call_args_list], [(protocol.CREATE_TASK_SCHEDULE, on.name)])

	def test_delete_is_refused_while_a_schedule_uses_it(self):
		calendar = make_calendar("BTU Test In Use", [date(2026, 12, 25)])
		schedule = make_schedule(self.task.name, calendar=calendar.name)
		with self.assertRaises(frappe.LinkExistsError) as caught:
			frappe.delete_doc("BTU Calendar", calendar.name)
		self.assertIn(schedule.name, str(caught.exception))
		schedule.calendar = None
		schedule.save()
		frappe.delete_doc("BTU Calendar", calendar.name)
		self.assertFalse(frappe.db.exists("BTU Calendar", calendar.name))

	def test_bad_dates_and_holiday_list(self):
		with self.assertRaises(frappe.ValidationError):
			make_calendar("BTU Test Bad", ["2026-02-30"])
		if not frappe.db.exists("DocType", "Holiday List"):
			with self.assertRaises(frappe.ValidationError) as caught:
				make_calendar("BTU Test HRMS", [], holiday_list="Anything")
			self.assertIn("ERPNext or HRMS", str(caught.exception))

	def test_large_calendar_is_bounded(self):
		start = date(2020, 1, 1)
		too_many = [start + timedelta(days=i) for i in range(10_001)]
		with self.assertRaises(frappe.ValidationError):
			make_calendar("BTU Test Huge", too_many)
