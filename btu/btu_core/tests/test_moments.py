"""The moment a person or program gives BTU is the moment that fires, whatever zones are about.

The rule: a Datetime is stored on the system zone's wall clock, as Frappe stores every Datetime; text or a datetime
with an offset names its own moment; the schedule's time_zone places its recurrence only, and the caller's own zone
(User.time_zone) is the Desk's to convert (the browser tests, desk/test_desk_schedules.py). Here the person's, the
system's and the schedule's zones all differ, and each entry that is not the Desk is checked: a schedule's row as REST
writes it, run_once_at, backfill, enqueue_at, and the upgrade patch that moved stored values to this rule.
"""

from __future__ import annotations

from datetime import datetime, timedelta, timezone
from zoneinfo import ZoneInfo

import frappe
from frappe.utils import get_system_timezone

import btu
from btu.btu_core import api
from btu.btu_core.schedules.preview import next_fires
from btu.btu_core.tests.utils import SAMPLES, delete_committed, make_schedule, make_task, make_user
from btu.patches.v1_0 import schedule_moments_on_system_clock

try:
	from frappe.tests import IntegrationTestCase
except ImportError:
	from frappe.tests.utils import FrappeTestCase as IntegrationTestCase

PERSON = "btu-moments@example.com"
ZONES = ("Asia/Tokyo", "Europe/London", "America/New_York", "Australia/Adelaide")


class TestMoments(IntegrationTestCase):
	def setUp(self):
		frappe.set_user("Administrator")
		self.system = get_system_timezone()
		self.person_zone, self.schedule_zone = [zone for zone in ZONES if zone != self.system][:2]
		make_user(PERSON, ("System Manager",)).db_set("time_zone", self.person_zone)
		frappe.clear_cache(user=PERSON)
		self.task = make_task()
		frappe.set_user(PERSON)

	def tearDown(self):
		frappe.set_user("Administrator")
		delete_committed(self.task.name)

	def system_wall(self, moment: datetime) -> datetime:
		return moment.astimezone(ZoneInfo(self.system)).replace(tzinfo=None)

	def first_fire(self, schedule) -> str:
		return next_fires(schedule, 1, after=datetime(2026, 1, 1, tzinfo=timezone.utc))["fires"][0]["utc"]

	def test_a_naive_run_at_is_on_the_system_clock_not_the_schedules_or_the_persons(self):
		moment = datetime(2030, 6, 1, 9, 0, tzinfo=timezone.utc)
		schedule = make_schedule(
			self.task.name, run_frequency="Once", time_zone=self.schedule_zone, run_at=self.system_wall(moment)
		)
		self.assertEqual(self.first_fire(schedule), "2030-06-01T09:00:00Z")

	def test_text_with_an_offset_names_its_moment_and_is_stored_on_the_system_clock(self):
		"""What a REST client sends: ISO 8601 with an offset, into each of the three columns."""
		schedule = make_schedule(
			self.task.name,
			run_frequency="Daily",
			hour=9,
			minute=0,
			time_zone=self.schedule_zone,
			start_time="2030-06-01T18:00:00+09:00",
			end_time="2030-06-10T09:00:00Z",
		)
		self.assertEqual(schedule.start_time, self.system_wall(datetime(2030, 6, 1, 9, tzinfo=timezone.utc)))
		self.assertEqual(schedule.end_time, self.system_wall(datetime(2030, 6, 10, 9, tzinfo=timezone.utc)))
		once = make_schedule(
			self.task.name, run_frequency="Once", time_zone=self.schedule_zone, run_at="2030-06-01T18:00:00+09:00"
		)
		self.assertEqual(self.first_fire(once), "2030-06-01T09:00:00Z")

	def test_run_once_at_and_backfill_read_naive_text_on_the_system_clock(self):
		moment = datetime(2030, 6, 1, 9, 0, tzinfo=timezone.utc)
		for at in (self.system_wall(moment).isoformat(sep=" "), "2030-06-01T11:00:00+02:00"):
			created = frappe.get_doc("BTU Task Schedule", api.run_once_at(self.task.name, at)["schedule"])
			self.assertEqual(self.first_fire(created), "2030-06-01T09:00:00Z", at)
		schedule = make_schedule(self.task.name, run_frequency="Hourly", minute=0, time_zone=self.schedule_zone)
		top = datetime.now(timezone.utc).replace(minute=0, second=0, microsecond=0)
		start, end = top - timedelta(hours=3), top - timedelta(hours=2)
		result = api.backfill(schedule.name, str(self.system_wall(start)), end.isoformat())
		self.assertEqual(result["slots"], 2, result)

	def test_enqueue_at_reads_a_naive_moment_on_the_system_clock(self):
		moment = (datetime.now(timezone.utc) + timedelta(hours=2)).replace(microsecond=0)
		for at in (self.system_wall(moment), moment, moment.isoformat()):
			request = btu.enqueue_at(f"{SAMPLES}.say_hello", at)
			self.assertEqual(frappe.db.get_value("BTU Run Request", request, "run_at"), self.system_wall(moment), at)
			btu.cancel(request)
			frappe.db.delete("BTU Run Request", {"name": request})


class TestMomentsPatch(IntegrationTestCase):
	"""The upgrade: values stored on the schedule's clock (the old reading) move to the system clock, same moment."""

	def setUp(self):
		frappe.set_user("Administrator")
		self.task = make_task()
		self.addCleanup(delete_committed, self.task.name)

	def test_each_value_keeps_its_moment(self):
		"""Run once, as Frappe's Patch Log runs a patch: a value moved cannot be told from one typed on the new rule."""
		system = get_system_timezone()
		zone = next(zone for zone in ZONES if zone != system)
		schedule = make_schedule(self.task.name, run_frequency="Daily", time_zone=zone)
		once = make_schedule(self.task.name, run_frequency="Once", time_zone=zone, run_at="2030-01-01 00:00:00")
		unknown = make_schedule(self.task.name, run_frequency="Daily", time_zone="UTC")
		walls = {"start_time": "2030-03-01 08:00:00", "end_time": "2030-03-31 20:30:00.250000"}
		frappe.db.set_value("BTU Task Schedule", schedule.name, walls, update_modified=False)
		frappe.db.set_value("BTU Task Schedule", once.name, "run_at", "2030-07-04 12:00:00", update_modified=False)
		frappe.db.set_value(
			"BTU Task Schedule", unknown.name, {"time_zone": "Mars/Olympus", **walls}, update_modified=False
		)
		schedule_moments_on_system_clock.execute()

		def moved(wall: str) -> datetime:
			aware = datetime.fromisoformat(wall).replace(tzinfo=ZoneInfo(zone))
			return aware.astimezone(ZoneInfo(system)).replace(tzinfo=None)

		row = frappe.db.get_value("BTU Task Schedule", schedule.name, list(walls), as_dict=True)
		self.assertEqual(row, {field: moved(wall) for field, wall in walls.items()})
		self.assertEqual(frappe.db.get_value("BTU Task Schedule", once.name, "run_at"), moved("2030-07-04 12:00:00"))
		left = frappe.db.get_value("BTU Task Schedule", unknown.name, list(walls), as_dict=True)
		self.assertEqual(left, {field: datetime.fromisoformat(wall) for field, wall in walls.items()})
