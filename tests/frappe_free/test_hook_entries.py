"""A `btu_schedules` hook entry checked and mapped onto Task and Schedule fields: every error names the app,
the entry and the key."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from btu.btu_core.schedules.hook_entries import (
	HOOK,
	SCHEDULE_FIELDS,
	SCHEDULE_KEYS,
	TASK_FIELDS,
	TASK_KEYS,
	DeclaredScheduleError,
	check_each,
	zone_after,
)  # fmt: skip

pytestmark = pytest.mark.versions

BASE = {"name": "nightly", "function": "myapp.tasks.nightly", "cron": "0 2 * * *"}
HOOKS = Path(__file__).resolve().parents[2] / "btu" / "hooks.py"


def check_entries(app, entries) -> list:
	"""`check_each`, raising the first refusal (as the sync does in strict mode)."""
	checked, bad = check_each(app, entries)
	if bad:
		raise bad[0].error
	return checked


def test_each_entry_is_checked_on_its_own():
	"""A bad entry is refused with its reason and its name when usable; the entries around it are kept."""
	good, bad = check_each(
		"myapp",
		[BASE, {**BASE, "name": "second", "cron": "nope"}, {"name": "", "cron": "x"}, {**BASE, "name": "third"}, BASE],
	)
	assert [item.key for item in good] == ["nightly", "third"]
	assert [(r.app, r.key) for r in bad] == [("myapp", "second"), ("myapp", None), ("myapp", "nightly")]
	assert "entry 'second', key 'cron'" in bad[0].reason and "two entries use this name" in bad[2].reason
	[whole] = check_each("myapp", "not a list")[1]
	assert whole.key is None and "is a str; write a list of dicts" in whole.reason


def refused(entries, app="myapp") -> str:
	with pytest.raises(DeclaredScheduleError) as caught:
		check_entries(app, entries)
	return str(caught.value)


def test_a_cron_entry_maps_onto_the_task_and_the_schedule():
	[item] = check_entries(
		"myapp",
		[
			{
				**BASE,
				"arguments": {"b": 1, "a": [2]},
				"queue": "long",
				"timeout": 900,
				"max_attempts": 3,
				"time_zone": "Europe/Paris",
				"overlap_policy": "skip",
			}
		],
	)
	assert (item.app, item.key) == ("myapp", "nightly")
	assert item.task["function_string"] == "myapp.tasks.nightly"
	assert item.task["arguments"] == '{"a": [2], "b": 1}'
	assert (item.task["queue_name"], item.task["max_task_duration"], item.task["max_attempts"]) == ("long", 900, 3)
	assert item.task["desc_short"] == "myapp: nightly"
	assert (item.schedule["run_frequency"], item.schedule["cron_string"]) == ("Cron Style", "0 2 * * *")
	assert (item.time_zone, item.schedule["overlap_policy"]) == ("Europe/Paris", "skip")
	assert item.schedule["catch_up_policy"] is None, "left out: the DocType's default"


def test_a_helper_frequency_gets_the_cron_the_schedule_form_writes():
	[item] = check_entries(
		"myapp",
		[
			{
				"name": "w",
				"function": "myapp.t.f",
				"frequency": "Weekly",
				"day_of_week": "Friday",
				"hour": 18,
				"minute": 5,
			}
		],
	)
	assert (item.schedule["run_frequency"], item.schedule["cron_string"], item.schedule["hour"]) == (
		"Weekly",
		"5 18 * * 5",
		18,
	)


def test_an_interval_and_the_site_zone():
	[item] = check_entries(
		"myapp", [{"name": "i", "function": "myapp.t.f", "every": 5, "every_unit": "Minutes", "time_zone": "site zone"}]
	)
	assert (item.schedule["run_frequency"], item.schedule["every"], item.schedule["every_unit"]) == (
		"Interval",
		5,
		"Minutes",
	)
	assert item.time_zone == "" and item.schedule["time_zone"] is None


def test_none_is_a_key_left_out():
	[item] = check_entries("myapp", [{**BASE, "cron": None, "every": 5, "queue": None, "time_zone": None}])
	assert (item.schedule["run_frequency"], item.task["queue_name"], item.time_zone) == ("Interval", None, "")


@pytest.mark.parametrize(
	("entry", "key", "problem"),
	[
		({**BASE, "colour": "red"}, "colour", "is not a key of btu_schedules"),
		({**BASE, "cron": "61 * * * *"}, "cron", "minute 61 is outside 0-59"),
		({**BASE, "time_zone": "Mars/Olympus"}, "time_zone", "is not a known IANA time zone"),
		({**BASE, "time_zone": " "}, "time_zone", "is empty"),
		({**BASE, "every": 5}, "every", "give exactly one timing"),
		({"name": "nightly", "function": "myapp.t.f"}, "cron", "give exactly one timing"),
		({**BASE, "every_unit": "Hours"}, "every_unit", "applies only with every"),
		({**BASE, "hour": 3}, "hour", "applies only with frequency"),
		({"name": "nightly", "function": "myapp.t.f", "frequency": "Fortnightly"}, "frequency", "is not one of Hourly"),
		(
			{
				"name": "nightly",
				"function": "myapp.t.f",
				"frequency": "Yearly",
				"month": "February",
				"day_of_month": 30,
			},
			"day_of_month",
			"February has no day 30",
		),
		(
			{"name": "nightly", "function": "myapp.t.f", "every": 3, "every_unit": "Weeks"},
			"every_unit",
			"must be one of Seconds",
		),
		({**BASE, "timeout": "600"}, "timeout", "is not a whole number"),
		({**BASE, "max_attempts": True}, "max_attempts", "is not a whole number"),
		({**BASE, "queue": 5}, "queue", "is not text"),
		({**BASE, "arguments": '{"a": 1}'}, "arguments", "is not a dict"),
		({**BASE, "arguments": {"when": object()}}, "arguments", "cannot be written as JSON"),
		({**BASE, "catch_up_policy": "always"}, "catch_up_policy", "must be one of fire_once"),
		({**BASE, "catch_up_window": -1}, "catch_up_window", "outside 0 or more"),
		({**BASE, "description": "x" * 141}, "description", "longer than 140"),
		({**BASE, "function": None}, "function", "is required"),
	],
)
def test_a_bad_value_names_the_app_the_entry_and_the_key(entry, key, problem):
	message = refused([entry])
	assert message.startswith(f"{HOOK} in myapp/hooks.py, entry 'nightly', key '{key}': "), message
	assert problem in message


@pytest.mark.parametrize(
	"function",
	[
		"os.system",  # not an app
		"frappe.utils.now",  # another app's function
		"myapp_evil.tasks.nightly",  # a look-alike app name
		"myap.tasks.nightly",
		"myаpp.tasks.nightly",  # Cyrillic "а"
		"myapp",  # no module
		"myapp.tasks.night ly",
		"myapp..tasks",
		"__import__('os').system",
	],
)
def test_only_the_apps_own_functions(function):
	message = refused([{**BASE, "function": function}])
	assert message.startswith(f"{HOOK} in myapp/hooks.py, entry 'nightly', key 'function': "), message


def test_another_apps_function_is_named_as_such():
	assert "is not a function of app myapp: an app's btu_schedules names only its own functions" in refused(
		[{**BASE, "function": "frappe.utils.now"}]
	)


@pytest.mark.parametrize("name", [None, "", "a b", "x" * 101, 5, "../etc"])
def test_an_entry_needs_a_stable_name(name):
	assert "key 'name'" in refused([{**BASE, "name": name}])


def test_duplicate_names_are_refused():
	message = refused([BASE, {**BASE, "cron": "0 3 * * *"}])
	assert message.startswith(f"{HOOK} in myapp/hooks.py, entry 'nightly', key 'name': two entries use this name")


@pytest.mark.parametrize("entries", [{"name": "nightly"}, "nightly", [["nightly"]]])
def test_the_hook_must_be_a_list_of_dicts(entries):
	assert refused(entries).startswith(f"{HOOK} in myapp/hooks.py")


def test_one_bad_entry_refuses_the_whole_list():
	with pytest.raises(DeclaredScheduleError, match="entry 'second'"):
		check_entries("myapp", [BASE, {**BASE, "name": "second", "cron": "nope"}])


def test_no_hook_is_no_schedules():
	assert check_entries("myapp", None) == [] and check_entries("myapp", []) == []


@pytest.mark.parametrize(
	("row_zone", "declared_zone", "hook_zone", "kept"),
	[
		("Europe/Paris", "Europe/Paris", "Asia/Tokyo", "Asia/Tokyo"),  # the admin left it: the hook's change applies
		("", "", "UTC", "UTC"),  # site zone -> a zone
		("America/Lima", "Europe/Paris", "Asia/Tokyo", "America/Lima"),  # the admin changed it: theirs stays
		("", "Europe/Paris", "Asia/Tokyo", ""),  # the admin chose the site zone
		(None, None, "", ""),
	],
)
def test_the_zone_is_the_hooks_until_the_admin_changes_it(row_zone, declared_zone, hook_zone, kept):
	assert zone_after(row_zone, declared_zone, hook_zone) == kept


def test_every_hook_key_maps_onto_an_app_field():
	assert set(TASK_KEYS.values()) <= set(TASK_FIELDS)
	assert set(SCHEDULE_KEYS.values()) - {"time_zone"} <= set(SCHEDULE_FIELDS), "time_zone is the admin's once made"
	assert not {"enabled", "paused", "pause_note", "time_zone", "calendar", "alert_rules"} & set(SCHEDULE_FIELDS)


def test_btus_own_maintenance_hook_checks():
	"""BTU's hooks.py declares its maintenance jobs as btu_schedules, each function declared runnable by btu_tasks."""
	hooks = {
		node.targets[0].id: ast.literal_eval(node.value)
		for node in ast.parse(HOOKS.read_text()).body
		if isinstance(node, ast.Assign) and node.targets[0].id in (HOOK, "btu_tasks", "scheduler_events")
	}
	items = check_entries("btu", hooks[HOOK])
	functions = {item.task["function_string"] for item in items}
	assert functions == {
		"btu.btu_core.doctype.btu_task_log.btu_task_log.delete_expired_logs",
		"btu.btu_core.doctype.btu_run_request.btu_run_request.delete_expired_run_requests",
		"btu.btu_core.runs.lost_runs.mark_lost_runs_timed_out",
	}
	assert functions <= set(hooks["btu_tasks"])
	assert hooks["scheduler_events"] == {"cron": {"* * * * *": ["btu.btu_core.alerts.watchdog.check"]}}, (
		"only the watchdog stays on Frappe's scheduler"
	)
