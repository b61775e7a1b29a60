"""Schedules declared in an app's hooks.py (`btu_schedules`): synced into BTU Tasks and Schedules at migrate,
the app's fields the app's, the admin's the admin's; a bad entry skipped and listed (refused whole in strict mode)."""

from unittest import mock

import frappe

from btu.btu_core import api
from btu.btu_core.schedules import declared_schedules
from btu.btu_core.schedules.hook_entries import HOOK
from btu.btu_core.tests.utils import SAMPLES, make_user, other_connection

try:
	from frappe.tests import IntegrationTestCase
except ImportError:
	from frappe.tests.utils import FrappeTestCase as IntegrationTestCase

TASK = "BTU Task"
SCHEDULE = "BTU Task Schedule"
HELLO = {"name": "test_hello", "function": f"{SAMPLES}.say_hello", "cron": "0 2 * * *", "arguments": {"name": "hook"}}
MANAGER = "btu-declared-manager@example.com"


def own() -> list[dict]:
	"""BTU's own entries, so a test's hook list for btu keeps them."""
	return list(frappe.get_hooks(HOOK, app_name="btu"))


def sync(*entries) -> None:
	declared_schedules.sync({"btu": own() + list(entries)})


def rows(key: str):
	"""The (Task, Schedule) documents of btu's entry `key`, or None each."""
	task = frappe.db.get_value(TASK, {"declared_by_app": "btu", "declared_key": key})
	schedule = frappe.db.get_value(SCHEDULE, {"declared_by_app": "btu", "declared_key": key})
	return (frappe.get_doc(TASK, task) if task else None), (frappe.get_doc(SCHEDULE, schedule) if schedule else None)


def snapshot() -> list:
	"""Every declared row as it stands, to show a refused sync changed nothing."""
	return [
		frappe.get_all(
			doctype,
			filters={"declared_by_app": ("is", "set")},
			fields=["name", "modified", "declared_key"],
			order_by="name",
		)
		for doctype in (TASK, SCHEDULE)
	]


class DeclaredSchedulesTestCase(IntegrationTestCase):
	"""Each test's syncs undone after it; its subclasses hold the tests."""

	def setUp(self):
		frappe.set_user("Administrator")
		frappe.db.savepoint("test_declared")

	def tearDown(self):
		frappe.set_user("Administrator")
		frappe.db.rollback(save_point="test_declared")


class TestBadEntries(DeclaredSchedulesTestCase):
	"""A bad entry: skipped, logged and listed (the good ones sync), or failing the whole sync in strict mode."""

	def conf(self, **values):
		"""The site config for this test: developer mode and btu_fail_on_bad_schedule_hooks off unless given."""
		patcher = mock.patch.dict(frappe.conf, {"developer_mode": 0, declared_schedules.STRICT_KEY: 0, **values})
		patcher.start()
		self.addCleanup(patcher.stop)

	def test_a_bad_entry_is_skipped_logged_and_listed_and_the_good_ones_sync(self):
		"""What bench migrate runs (after_migrate): a bad entry must not stop it for the later sites and apps."""
		self.conf()
		sync(HELLO, {**HELLO, "name": "typo"})
		typo_task, _ = rows("typo")
		bad_cron = {**HELLO, "name": "typo", "cron": "0 25 * * *"}
		refused_save = {**HELLO, "name": "undeclared", "function": f"{SAMPLES}.undeclared_task"}
		with mock.patch("builtins.print") as printed, mock.patch.object(frappe.logger("btu"), "warning") as logged:
			sync(
				{**HELLO, "cron": "5 2 * * *"},
				bad_cron,
				refused_save,
				{**HELLO, "name": "after_them", "cron": "7 2 * * *"},
			)
		self.assertEqual(rows("test_hello")[1].cron_string, "5 2 * * *", "the good entry before the bad ones synced")
		self.assertEqual(rows("after_them")[1].cron_string, "7 2 * * *", "and the one after them")
		task, schedule = rows("typo")
		self.assertEqual(
			(task.name, schedule.cron_string), (typo_task.name, "0 2 * * *"), "a skipped entry's rows stay as they were"
		)
		self.assertEqual(rows("undeclared"), (None, None), "a refused save is undone, alone")
		lines = [call.args[0] for call in printed.call_args_list]
		self.assertEqual(lines, [call.args[0] for call in logged.call_args_list])
		self.assertEqual(len(lines), 2, lines)
		self.assertIn(
			"skipped btu_schedules in btu/hooks.py, entry 'typo', key 'cron': cron_string '0 25 * * *': hour 25",
			lines[0],
		)
		self.assertIn("entry 'undeclared': ", lines[1])
		self.assertIn("is not declared runnable by BTU", lines[1])
		listed = api.status()["declared_skipped"]
		self.assertEqual([(row["app"], row["entry"]) for row in listed], [("btu", "typo"), ("btu", "undeclared")])
		self.assertIn("hour 25", listed[0]["reason"])
		sync(HELLO)
		self.assertEqual(api.status()["declared_skipped"], [], "a fixed hook clears the list")

	def test_a_bad_entry_fails_the_sync_in_developer_mode_or_with_the_flag(self):
		for values in ({"developer_mode": 1}, {declared_schedules.STRICT_KEY: 1}):
			self.conf(**values)
			sync(HELLO)
			before = snapshot()
			with self.subTest(conf=values), self.assertRaises(frappe.ValidationError) as caught:
				sync({**HELLO, "cron": "5 2 * * *"}, {**HELLO, "name": "bad", "cron": "0 25 * * *"})
			self.assertIn("entry 'bad', key 'cron'", str(caught.exception))
			self.assertEqual(snapshot(), before, "nothing changed")

	def test_a_bad_hook_names_app_entry_and_key_and_changes_nothing(self):
		self.conf(**{declared_schedules.STRICT_KEY: 1})
		sync(HELLO)
		before = snapshot()
		cases = {
			"key 'colour': is not a key of btu_schedules": {**HELLO, "colour": "red"},
			"key 'cron': cron_string '0 25 * * *': hour 25": {**HELLO, "cron": "0 25 * * *"},
			"key 'time_zone': time_zone 'Mars/Olympus'": {**HELLO, "time_zone": "Mars/Olympus"},
			"key 'function': 'frappe.utils.now' is not a function of app btu": {
				**HELLO,
				"function": "frappe.utils.now",
			},
			"key 'function': 'os.system' is not a function of app btu": {**HELLO, "function": "os.system"},
			"key 'function': 'btu_evil.tasks.run' is not a function of app btu": {
				**HELLO,
				"function": "btu_evil.tasks.run",
			},
			"key 'function': function_string 'btу.tasks.run'": {**HELLO, "function": "btу.tasks.run"},  # Cyrillic "у"
			"key 'name': two entries use this name": [HELLO, HELLO],
		}
		for expected, entries in cases.items():
			with self.subTest(expected=expected), self.assertRaises(frappe.ValidationError) as caught:
				sync(
					*(
						entries
						if isinstance(entries, list)
						else [{**HELLO, "cron": "5 2 * * *"}, {**entries, "name": "bad"}]
					)
				)
			entry = "test_hello" if isinstance(entries, list) else "bad"
			self.assertIn(f"btu_schedules in btu/hooks.py, entry '{entry}', {expected}", str(caught.exception))
			self.assertEqual(snapshot(), before, "nothing changed")
			self.assertEqual(rows("test_hello")[1].cron_string, "0 2 * * *")

	def test_a_save_the_controllers_refuse_names_the_entry_and_is_undone_whole(self):
		self.conf(**{declared_schedules.STRICT_KEY: 1})
		sync(HELLO)
		before = snapshot()
		for bad, message in (
			({"function": f"{SAMPLES}.undeclared_task"}, "is not declared runnable by BTU"),
			({"queue": "nowhere"}, "is not a queue of this bench"),
			({"arguments": {"nobody": 1}}, "do not fit"),
			({"max_attempts": 1000}, "Max Attempts 1000"),
		):
			with self.subTest(bad=bad), self.assertRaises(frappe.ValidationError) as caught:
				sync({**HELLO, "cron": "5 2 * * *"}, {**HELLO, "name": "bad", **bad})
			self.assertIn("btu_schedules in btu/hooks.py, entry 'bad': ", str(caught.exception))
			self.assertIn(message, str(caught.exception))
			self.assertEqual(snapshot(), before, "the entry before it was undone too")


class TestDeclaredSchedules(DeclaredSchedulesTestCase):
	"""Good entries: their rows made, updated and deleted; the app's fields the app's, the admin's the admin's."""

	def test_an_entry_becomes_a_task_and_a_schedule_marked_with_the_app(self):
		frappe.db.set_single_value("BTU Configuration", "default_time_zone", "Asia/Tokyo")
		sync(
			{
				**HELLO,
				"queue": "short",
				"timeout": 120,
				"max_attempts": 2,
				"overlap_policy": "skip",
				"description": "Greets",
			}
		)
		task, schedule = rows("test_hello")
		self.assertEqual(
			(
				task.function_string,
				frappe.parse_json(task.arguments),
				task.queue_name,
				task.max_task_duration,
				task.max_attempts,
				task.desc_short,
			),
			(f"{SAMPLES}.say_hello", {"name": "hook"}, "short", 120, 2, "Greets"),
		)
		self.assertEqual(
			(schedule.task, schedule.run_frequency, schedule.cron_string, schedule.overlap_policy),
			(task.name, "Cron Style", "0 2 * * *", "skip"),
		)
		self.assertEqual((schedule.enabled, schedule.paused), (1, 0))
		self.assertEqual(schedule.catch_up_policy, "fire_once", "a policy left out is the DocType's default")
		self.assertFalse(
			schedule.time_zone, "site zone: empty, the System Settings zone, not BTU Configuration's default"
		)
		self.assertTrue(schedule.schedule_description, "the Schedule's own validation ran")

	def test_an_unchanged_hook_saves_nothing(self):
		sync(HELLO)
		before = snapshot()
		sync(HELLO)
		self.assertEqual(snapshot(), before)

	def test_a_changed_hook_updates_the_apps_fields_and_keeps_the_admins(self):
		sync({**HELLO, "time_zone": "Europe/Paris"})
		task, schedule = rows("test_hello")
		api.pause(schedule.name, "quiet week")
		schedule.reload()
		schedule.enabled = 0
		schedule.time_zone = "America/Lima"
		schedule.save()
		sync(
			{
				**HELLO,
				"every": 10,
				"every_unit": "Minutes",
				"cron": None,
				"queue": "long",
				"time_zone": "Asia/Tokyo",
				"arguments": {"name": "changed"},
			}
		)
		task, schedule = rows("test_hello")
		self.assertEqual(
			(schedule.run_frequency, schedule.every, schedule.every_unit, schedule.cron_string),
			("Interval", 10, "Minutes", None),
		)
		self.assertEqual((task.queue_name, frappe.parse_json(task.arguments)), ("long", {"name": "changed"}))
		self.assertEqual((schedule.enabled, schedule.paused, schedule.pause_note), (0, 1, "quiet week"))
		self.assertEqual(
			(schedule.time_zone, schedule.declared_time_zone), ("America/Lima", "Asia/Tokyo"), "the admin's zone stays"
		)

	def test_a_zone_the_admin_left_follows_the_hook(self):
		sync({**HELLO, "time_zone": "Europe/Paris"})
		sync({**HELLO, "time_zone": "Asia/Tokyo"})
		self.assertEqual(rows("test_hello")[1].time_zone, "Asia/Tokyo")
		sync(HELLO)
		self.assertFalse(rows("test_hello")[1].time_zone, "back to the site zone")

	def test_a_removed_entry_deletes_its_task_and_schedule(self):
		sync(HELLO)
		task, schedule = rows("test_hello")
		sync()
		self.assertFalse(frappe.db.exists(TASK, task.name))
		self.assertFalse(frappe.db.exists(SCHEDULE, schedule.name))
		self.assertTrue(rows("delete_expired_logs")[1], "btu's own stay")

	def test_a_removed_entry_with_logs_is_retired_then_deleted_once_they_are_gone(self):
		sync(HELLO)
		task, schedule = rows("test_hello")
		log = frappe.get_doc(
			{"doctype": "BTU Task Log", "task": task.name, "schedule": schedule.name, "status": "Succeeded"}
		).insert()
		sync()
		schedule.reload()
		task.reload()
		schedule.run_method("onload")
		self.assertEqual(
			(schedule.enabled, schedule.declared_key, schedule.declared_by_app, task.declared_key),
			(0, None, "btu", None),
		)
		self.assertIn("Removed from the btu_schedules hook", schedule.get_onload("btu_declared")["intro"])
		sync()
		self.assertEqual(
			frappe.db.get_value(SCHEDULE, schedule.name, "modified"),
			schedule.modified,
			"retired once, not at every migrate",
		)
		schedule.enabled = 1
		with self.assertRaisesRegex(
			frappe.ValidationError, "removed from the btu_schedules hook of app btu; it stays disabled"
		):
			schedule.save()
		sync(HELLO)
		new_task, new_schedule = rows("test_hello")
		self.assertNotEqual(
			new_schedule.name, schedule.name, "the entry back: new rows, the retired ones keep the history"
		)
		frappe.delete_doc("BTU Task Log", log.name)
		sync(HELLO)
		self.assertFalse(frappe.db.exists(SCHEDULE, schedule.name), "nothing links to it now: deleted")
		self.assertFalse(frappe.db.exists(TASK, task.name))

	def test_the_desk_may_not_change_the_apps_fields(self):
		sync(HELLO)
		task, schedule = rows("test_hello")
		for doc, field, value in (
			(schedule, "cron_string", "0 3 * * *"),
			(schedule, "overlap_policy", "skip"),
			(schedule, "argument_overrides", '{"name": "x"}'),
			(schedule, "declared_key", "other"),
			(task, "function_string", f"{SAMPLES}.maybe_fail"),
			(task, "queue_name", "long"),
			(task, "declared_by_app", ""),
		):
			with self.subTest(field=field), self.assertRaises(frappe.ValidationError) as caught:
				doc.reload()
				doc.set(field, value)
				doc.save()
			self.assertIn(
				f"{field} declared by app btu in its hooks.py; edit its btu_schedules entry there and run bench "
				"migrate",
				str(caught.exception),
			)
		schedule.reload()
		schedule.run_method("onload")
		self.assertEqual(schedule.get_onload("btu_declared")["fields"][:2], ["declared_by_app", "declared_key"])
		self.assertIn(
			"Declared by app btu in hooks.py (btu_schedules entry test_hello)",
			schedule.get_onload("btu_declared")["intro"],
		)

	def test_the_admin_may_pause_disable_and_change_the_zone(self):
		sync(HELLO)
		schedule = rows("test_hello")[1]
		make_user(MANAGER, ("BTU Manager",))
		frappe.set_user(MANAGER)
		api.pause(schedule.name, "holiday")
		api.resume(schedule.name)
		frappe.set_user("Administrator")
		schedule.reload()
		schedule.update({"enabled": 0, "time_zone": "Europe/Paris", "pause_after_failures": 3})
		schedule.save()
		self.assertEqual((schedule.enabled, schedule.time_zone), (0, "Europe/Paris"))

	def test_a_declared_row_is_not_deleted_or_made_by_hand(self):
		sync(HELLO)
		task, schedule = rows("test_hello")
		for doctype, name in ((SCHEDULE, schedule.name), (TASK, task.name)):
			with (
				self.subTest(doctype=doctype),
				self.assertRaisesRegex(frappe.ValidationError, "remove the entry there and run bench migrate"),
			):
				frappe.delete_doc(doctype, name)
		with self.assertRaisesRegex(frappe.ValidationError, "declared_by_app btu is set only by bench migrate"):
			frappe.get_doc(
				{
					"doctype": TASK,
					"desc_short": "forged",
					"function_string": f"{SAMPLES}.say_hello",
					"queue_name": "default",
					"declared_by_app": "btu",
					"declared_key": "forged",
				}
			).insert()

	def test_btus_own_maintenance_runs_on_declared_schedules_not_frappes(self):
		# As a fresh install makes them: an admin may have disabled them on this site (rolled back after the test).
		frappe.db.delete(SCHEDULE, {"declared_by_app": "btu"})
		frappe.db.delete(TASK, {"declared_by_app": "btu"})
		declared_schedules.sync()
		maintenance = {
			"delete_expired_logs": "btu.btu_core.doctype.btu_task_log.btu_task_log.delete_expired_logs",
			"delete_expired_run_requests": (
				"btu.btu_core.doctype.btu_run_request.btu_run_request.delete_expired_run_requests"
			),
			"mark_lost_runs_timed_out": "btu.btu_core.runs.lost_runs.mark_lost_runs_timed_out",
		}
		for key, function in maintenance.items():
			task, schedule = rows(key)
			self.assertEqual((task.function_string, schedule.task, schedule.enabled), (function, task.name, 1), key)
			hooked = [
				method
				for methods in frappe.get_hooks("scheduler_events", app_name="btu").get("cron", {}).values()
				for method in methods
			]
			self.assertNotIn(function, hooked + frappe.get_hooks("scheduler_events", app_name="btu").get("daily", []))
			self.assertFalse(
				frappe.db.exists("Scheduled Job Type", {"method": function}), "migrate dropped Frappe's job"
			)
		self.assertEqual(rows("mark_lost_runs_timed_out")[1].cron_string, "*/5 * * * *")
		self.assertTrue(
			frappe.db.exists("Scheduled Job Type", {"method": "btu.btu_core.alerts.watchdog.check"}),
			"the watchdog stays on Frappe's scheduler",
		)

	def test_after_app_install_syncs_that_app(self):
		frappe.db.delete(SCHEDULE, {"declared_by_app": "btu", "declared_key": "mark_lost_runs_timed_out"})
		declared_schedules.app_installed("btu")
		self.assertTrue(rows("mark_lost_runs_timed_out")[1])


class TestAppUninstalled(IntegrationTestCase):
	"""`bench --site S uninstall-app APP`: Frappe's remove_app commits its own work, then calls each after_app_uninstall
	hook with the app's name, and the command closes the connection without committing. The rows must be gone for
	every later session, not only inside the hook's transaction."""

	APP = "gone_app"

	def setUp(self):
		frappe.set_user("Administrator")
		self.addCleanup(self.remove_leftovers)

	def remove_leftovers(self):
		frappe.db.rollback()
		for doctype in (SCHEDULE, TASK):
			for name in frappe.get_all(doctype, filters={"declared_by_app": self.APP}, pluck="name"):
				frappe.delete_doc(
					doctype, name, force=True, ignore_permissions=True, flags={declared_schedules.FLAG: True}
				)
		frappe.db.commit()

	def declared(self, values: dict):
		doc = frappe.get_doc({**values, "declared_by_app": self.APP, "declared_key": "nightly"})
		doc.flags[declared_schedules.FLAG] = True
		return doc.insert()

	def test_an_uninstalled_apps_task_and_schedule_are_gone_for_a_fresh_session(self):
		task = self.declared(
			{"doctype": TASK, "desc_short": "gone", "function_string": f"{SAMPLES}.say_hello", "queue_name": "default"}
		)
		schedule = self.declared(
			{
				"doctype": SCHEDULE,
				"task": task.name,
				"enabled": 0,
				"run_frequency": "Daily",
				"hour": 2,
				"minute": 30,
				"time_zone": "UTC",
			}
		)
		frappe.db.commit()  # the app's rows, as an earlier migrate left them
		# remove_app, after its last commit (frappe/installer.py), calls each app's hook: BTU's is the one under test
		# (v16's own imports the app it is told of, which this made-up one is not).
		for hook in frappe.get_hooks("after_app_uninstall", app_name="btu"):
			frappe.get_attr(hook)(self.APP)
		# ...and the command's frappe.destroy() closes the connection uncommitted: only what the hook committed stays.
		frappe.db.rollback()
		fresh = other_connection(self)
		try:
			with fresh.cursor() as cursor:
				cursor.execute("SELECT name FROM `tabBTU Task Schedule` WHERE name = %s", (schedule.name,))
				schedules = cursor.fetchall()
				cursor.execute("SELECT name FROM `tabBTU Task` WHERE name = %s", (task.name,))
				tasks = cursor.fetchall()
		finally:
			fresh.close()
		self.assertEqual(
			(schedules, tasks), ((), ()), "the uninstalled app's Schedule and Task are gone from the database"
		)
