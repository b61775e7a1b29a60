import json
from datetime import datetime, timezone

import frappe
from frappe.utils.background_jobs import get_redis_conn

from btu.btu_core.doctype.btu_task_schedule.btu_task_schedule import preview
from btu.btu_core.scheduler_link import bench_keys
from btu.btu_core.schedules.preview import next_fires
from btu.btu_core.tests.utils import make_schedule, make_task, make_user
from btu.shared import protocol

try:
	from frappe.tests import IntegrationTestCase
except ImportError:
	from frappe.tests.utils import FrappeTestCase as IntegrationTestCase


class TestBTUTaskScheduleValidation(IntegrationTestCase):
	def setUp(self):
		self.task = make_task()

	def test_helper_frequency_sets_local_cron_and_description(self):
		schedule = make_schedule(
			self.task.name,
			run_frequency="Weekly",
			day_of_week="Tuesday",
			hour=9,
			minute=5,
			time_zone="America/New_York",
		)
		self.assertEqual(schedule.cron_string, "5 9 * * 2")
		self.assertIn("America/New_York", schedule.schedule_description)
		self.assertIn("Tuesday", schedule.schedule_description)

	def test_yearly_keeps_day_and_month(self):
		schedule = make_schedule(
			self.task.name, run_frequency="Yearly", month="March", day_of_month=15, hour=6, minute=0
		)
		self.assertEqual(schedule.cron_string, "0 6 15 3 *")

	def test_bad_cron_names_field_value_and_problem(self):
		with self.assertRaises(frappe.ValidationError) as caught:
			make_schedule(self.task.name, run_frequency="Cron Style", cron_string="61 * * * *")
		message = str(caught.exception)
		self.assertIn("cron_string", message)
		self.assertIn("61", message)

	def test_bad_zone_is_refused(self):
		with self.assertRaises(frappe.ValidationError) as caught:
			make_schedule(self.task.name, time_zone="Europe/Atlantis")
		self.assertIn("time_zone 'Europe/Atlantis'", str(caught.exception))

	def test_hour_out_of_range(self):
		with self.assertRaises(frappe.ValidationError) as caught:
			make_schedule(self.task.name, run_frequency="Daily", hour=24)
		self.assertIn("hour", str(caught.exception))

	def test_argument_overrides_parse_error_names_line_and_column(self):
		text = '{"name": "Ada",}'
		with self.assertRaises(frappe.ValidationError) as caught:
			make_schedule(self.task.name, argument_overrides=text)
		message = str(caught.exception)
		self.assertIn("argument_overrides", message)
		# Where this Python's json puts the error: column 16 on 3.11, 15 on 3.13+ ("Illegal trailing comma").
		with self.assertRaises(json.JSONDecodeError) as parsed:
			json.loads(text)
		self.assertIn(
			f"line {parsed.exception.lineno}, column {parsed.exception.colno}: {parsed.exception.msg}", message
		)

	def test_overrides_complete_the_task_arguments(self):
		task = make_task(function="needs_company")
		with self.assertRaises(frappe.ValidationError) as caught:
			make_schedule(task.name)
		self.assertIn("company", str(caught.exception))
		schedule = make_schedule(task.name, argument_overrides='{"company": "ACME"}')
		self.assertEqual(json.loads(schedule.argument_overrides), {"company": "ACME"})

	def test_queue_override_must_exist(self):
		with self.assertRaises(frappe.ValidationError) as caught:
			make_schedule(self.task.name, queue_name="nope")
		self.assertIn("queue_name (override) 'nope'", str(caught.exception))

	def test_interval_needs_every(self):
		with self.assertRaises(frappe.ValidationError) as caught:
			make_schedule(self.task.name, run_frequency="Interval", every=0)
		self.assertIn("every", str(caught.exception))

	def test_preview_in_schedule_zone_and_user_zone(self):
		schedule = make_schedule(self.task.name, run_frequency="Daily", hour=2, minute=30, time_zone="Asia/Kolkata")
		preview = next_fires(schedule, 10, after=datetime(2026, 11, 22, tzinfo=timezone.utc))
		self.assertEqual(len(preview["fires"]), 10)
		self.assertEqual(preview["time_zone"], "Asia/Kolkata")
		first = preview["fires"][0]
		# 02:30 in Kolkata (UTC+05:30) is 21:00 UTC the day before.
		self.assertEqual(first["utc"], "2026-11-22T21:00:00Z")
		self.assertIn("2026-11-23 02:30:00", first["schedule_zone"])
		self.assertIn("html", schedule.preview_next_fires(3))

	def test_the_forms_preview_takes_the_unsaved_values_and_sends_no_doc_back(self):
		schedule = make_schedule(self.task.name, run_frequency="Daily", hour=2, minute=30, time_zone="UTC")
		on_screen = {**schedule.as_dict(), "hour": 7}
		frappe.response.docs = []
		answer = preview(json.dumps(on_screen, default=str), 2)
		self.assertEqual(answer["cron_string"], "30 7 * * *")
		self.assertIn("07:30:00", answer["fires"][0]["schedule_zone"])
		# The form writes a doc in the reply over its own: none goes back, so nothing typed meanwhile is undone.
		self.assertEqual(frappe.response.docs, [])
		unsaved = {"doctype": "BTU Task Schedule", "name": "new-btu-task-schedule-1", "__islocal": 1,
			"task": self.task.name, "run_frequency": "Hourly", "minute": 5, "time_zone": "UTC"}  # fmt: skip
		self.assertEqual(preview(unsaved)["cron_string"], "5 * * * *")

	def test_the_forms_preview_refuses_other_doctypes_and_users_without_a_btu_role(self):
		with self.assertRaises(frappe.ValidationError):
			preview({"doctype": "BTU Task", "name": self.task.name})
		make_user("btu-preview-plain@example.com")
		schedule = make_schedule(self.task.name)
		frappe.set_user("btu-preview-plain@example.com")
		try:
			with self.assertRaises(frappe.PermissionError):
				preview(schedule.as_dict())
		finally:
			frappe.set_user("Administrator")

	def test_once_schedule_has_one_fire(self):
		schedule = make_schedule(self.task.name, run_frequency="Once", run_at="2030-01-01T08:00:00Z")
		preview = next_fires(schedule, 10, after=datetime(2026, 1, 1, tzinfo=timezone.utc))
		self.assertEqual([f["utc"] for f in preview["fires"]], ["2030-01-01T08:00:00Z"])


def commands_for(schedule: str, before: frozenset[bytes]) -> list[dict]:
	return [json.loads(raw) for raw in raw_commands_for(schedule, before)]


def raw_commands_for(schedule: str, before: frozenset[bytes]) -> list[bytes]:
	"""This site's commands for `schedule` not in `before`: the bench's other sites share the list, and their names too
	(TS-000006); with no scheduler running, saves of earlier tests leave theirs, for a schedule name Frappe gives again
	once the schedule is deleted (each command is told apart by its response key)."""
	raw = get_redis_conn().lrange(bench_keys().commands, 0, -1)
	return [
		item
		for item in raw
		if item not in before
		and json.loads(item).get("request_content") == schedule
		and json.loads(item).get("site") == frappe.local.site
	]


def command_list() -> frozenset[bytes]:
	return frozenset(get_redis_conn().lrange(bench_keys().commands, 0, -1))


def acknowledged(schedule: str) -> int:
	return sum(1 for m in frappe.local.message_log if schedule in str(m) and "acknowledged" in str(m))


class TestScheduleAnnouncedAfterCommit(IntegrationTestCase):
	"""The scheduler hears of a schedule only once the row is committed (real Redis list)."""

	created: list[str]
	task: str | None = None

	def setUp(self):
		self.created = []
		self.before = command_list()
		frappe.local.message_log = []

	def tearDown(self):
		frappe.db.rollback()
		for name in self.created:
			for raw in raw_commands_for(name, self.before):
				get_redis_conn().lrem(bench_keys().commands, 0, raw)
		if self.task:
			frappe.db.delete("BTU Task Schedule", {"task": self.task})
			frappe.db.delete("BTU Task", {"name": self.task})
			frappe.db.commit()

	def test_create_and_cancel_are_sent_after_commit(self):
		self.task = make_task().name
		schedule = make_schedule(self.task, enabled=1)
		self.created.append(schedule.name)
		self.assertEqual(
			commands_for(schedule.name, self.before), [], "create_task_schedule was pushed before the commit"
		)

		frappe.db.commit()
		sent = commands_for(schedule.name, self.before)
		# Still in the list when no scheduler runs (the reply said "unreachable"),
		# or taken and acknowledged by a running scheduler.
		self.assertTrue(sent or acknowledged(schedule.name), frappe.local.message_log)
		for command in sent:
			self.assertEqual(command["request_type"], protocol.CREATE_TASK_SCHEDULE)
			self.assertEqual(command["site"], frappe.local.site)
			self.assertTrue(protocol.is_response_key(command["response_key"], bench_keys()))

		schedule.reload()
		schedule.enabled = 0
		schedule.save()
		self.assertFalse(
			[c for c in commands_for(schedule.name, self.before) if c["request_type"] == protocol.CANCEL_TASK_SCHEDULE],
			"cancel_task_schedule was pushed before the commit",
		)
		frappe.db.commit()
		cancels = [
			c for c in commands_for(schedule.name, self.before) if c["request_type"] == protocol.CANCEL_TASK_SCHEDULE
		]
		self.assertTrue(cancels or acknowledged(schedule.name) >= 2, frappe.local.message_log)

	def test_rolled_back_save_sends_nothing(self):
		task = make_task()
		schedule = make_schedule(task.name, enabled=1)
		self.created.append(schedule.name)
		frappe.db.rollback()
		frappe.db.commit()
		self.assertEqual(commands_for(schedule.name, self.before), [])
		self.assertFalse(acknowledged(schedule.name))
