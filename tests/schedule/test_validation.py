"""Validation messages name the field, the value and the fix; from_row defaults."""

from __future__ import annotations

import os
import subprocess
import sys
from datetime import datetime, timezone

import pytest

from btu.shared.schedule import ScheduleError, ScheduleSpec, frequency_to_cron, parse_zone
from tests.support.slack import patient

pytestmark = pytest.mark.versions


def cron_error(text: str) -> ScheduleError:
	with pytest.raises(ScheduleError) as info:
		ScheduleSpec.from_row({"run_frequency": "Cron Style", "cron_string": text}, system_time_zone="UTC")
	assert info.value.field == "cron_string" and info.value.value == text
	return info.value


@pytest.mark.parametrize(
	"text, message",
	[
		("61 * * * *", "cron_string '61 * * * *': minute 61 is outside 0-59"),
		("0 24 * * *", "cron_string '0 24 * * *': hour 24 is outside 0-23"),
		("0 0 0 * *", "cron_string '0 0 0 * *': day-of-month 0 is outside 1-31"),
		("0 0 * 13 *", "cron_string '0 0 * 13 *': month 13 is outside 1-12"),
		("0 0 * * 8", "cron_string '0 0 * * 8': day-of-week 8 is outside 0-7"),
		("60 0 0 * * *", "cron_string '60 0 0 * * *': second 60 is outside 0-59"),
		(
			"* * * *",
			"cron_string '* * * *': has 4 fields; use 5 (minute hour day-of-month month day-of-week) "
			"or 6 (second minute hour day-of-month month day-of-week)",
		),
		("*/0 * * * *", "cron_string '*/0 * * * *': minute step '/0' must be a whole number of 1 or more"),
		("*/x * * * *", "cron_string '*/x * * * *': minute step '/x' must be a whole number of 1 or more"),
		(
			"0 0 * * funday",
			"cron_string '0 0 * * funday': day-of-week 'funday' is neither a number 0-7 "
			"nor a name (sun, mon, tue, wed, thu, fri, sat)",
		),
		(
			"0 0 * foo *",
			"cron_string '0 0 * foo *': month 'foo' is neither a number 1-12 "
			"nor a name (jan, feb, mar, apr, may, jun, jul, aug, sep, oct, nov, dec)",
		),
		(
			"5-1 * * * *",
			"cron_string '5-1 * * * *': minute range 5-1 runs backwards; write it as low-high, or as two ranges",
		),
		("0 0 30 2 *", "cron_string '0 0 30 2 *': day-of-month 30 never occurs in February; pick a day that exists"),
		(
			"@fortnightly",
			"cron_string '@fortnightly': unknown macro @fortnightly; "
			"use one of @hourly, @daily, @midnight, @weekly, @monthly, @yearly, @annually",
		),
		(
			"0 0 L * *",
			"cron_string '0 0 L * *': day-of-month 'l' is not supported (BTU cron has no L, W, ?, # or H); "
			"use numbers, names, lists, ranges and steps",
		),
		("1,,2 * * * *", "cron_string '1,,2 * * * *': minute '1,,2' has an empty list item; remove the extra comma"),
	],
)
def test_cron_messages(text, message):
	assert str(cron_error(text)) == message


@pytest.mark.parametrize(
	"text, expanded",
	[
		("@hourly", "0 * * * *"),
		("@daily", "0 0 * * *"),
		("@midnight", "0 0 * * *"),
		("@weekly", "0 0 * * 0"),
		("@monthly", "0 0 1 * *"),
		("@yearly", "0 0 1 1 *"),
		("@annually", "0 0 1 1 *"),
	],
)
def test_macros_equal_their_expansion(text, expanded):
	after = datetime(2025, 1, 1, tzinfo=timezone.utc)
	a = ScheduleSpec(name="m", zone_name="Europe/London", kind="cron", cron=text)
	b = ScheduleSpec(name="m", zone_name="Europe/London", kind="cron", cron=expanded)
	assert a.preview(5, after) == b.preview(5, after)


def test_names_sunday_seven_and_vixie_day_or():
	after = datetime(2025, 1, 1, tzinfo=timezone.utc)  # a Wednesday

	def days(cron):
		spec = ScheduleSpec(name="d", zone_name="UTC", kind="cron", cron=cron)
		return [f.strftime("%m-%d") for f in spec.preview(4, after)]

	assert days("0 0 * * 7") == days("0 0 * * 0") == days("0 0 * * sun") == ["01-05", "01-12", "01-19", "01-26"]
	assert days("0 0 1 FEB-Mar *") == ["02-01", "03-01", "02-01", "03-01"]
	assert days("0 0 13 * fri") == ["01-03", "01-10", "01-13", "01-17"]  # 13th OR Friday
	assert days("0 0 */10 * fri") == ["01-31", "02-21", "03-21", "04-11"]  # dom starts with '*': AND
	assert days("0 0 * * 1/2") == ["01-03", "01-06", "01-08", "01-10"]  # 1-6/2: Mon, Wed, Fri


def test_both_croniter_versions_agree_on_what_we_expand():
	spec = ScheduleSpec(name="x", zone_name="UTC", kind="cron", cron="3/15 8-17/3 * jan,jul mon-fri")
	expr = spec._expr
	assert expr.minutes == (3, 18, 33, 48) and expr.hours == (8, 11, 14, 17)
	assert expr.months == (1, 7) and expr.dows == frozenset({1, 2, 3, 4, 5})
	# croniter 7 expands a-a as every value; both versions must see one value.
	single = ScheduleSpec(name="x", zone_name="UTC", kind="cron", cron="1-1 5-5/3 3-3 2-2 4-4")._expr
	assert (single.minutes, single.hours, single.doms, single.months, single.dows) == (
		(1,),
		(5,),
		(3,),
		(2,),
		frozenset({4}),
	)
	assert ScheduleSpec(name="x", zone_name="UTC", kind="cron", cron="0 23/5 * * 6/2")._expr.hours == (23,)


@pytest.mark.parametrize(
	"args, cron",
	[
		(("Hourly", 15), "15 * * * *"),
		(("Daily", 30, 2), "30 2 * * *"),
		(("Weekly", 0, 9, "Sunday"), "0 9 * * 0"),
		(("Weekly", 0, 9, "Monday"), "0 9 * * 1"),
		(("Monthly", 5, 4, None, 31), "5 4 31 * *"),
		(("Yearly", 0, 0, None, 29, "February"), "0 0 29 2 *"),
		(("Yearly", None, None, None, None, None), "0 0 1 1 *"),
	],
)
def test_frequency_helpers(args, cron):
	assert frequency_to_cron(*args) == cron


def test_every_helper_combination_the_form_allows_is_valid():
	from btu.shared.schedule.frequency import MONTH_DAYS, MONTH_NAMES, WEEKDAYS

	for name, length in zip(MONTH_NAMES, MONTH_DAYS):
		for day in range(1, length + 1):
			ScheduleSpec(
				name="y", zone_name="UTC", kind="cron", cron=frequency_to_cron("Yearly", 59, 23, None, day, name)
			)
	for day in range(1, 32):
		ScheduleSpec(name="m", zone_name="UTC", kind="cron", cron=frequency_to_cron("Monthly", 0, 0, None, day))
	for weekday in WEEKDAYS:
		ScheduleSpec(name="w", zone_name="UTC", kind="cron", cron=frequency_to_cron("Weekly", 0, 0, weekday))


def test_monthly_31_skips_short_months():
	spec = ScheduleSpec(name="m", zone_name="UTC", kind="cron", cron=frequency_to_cron("Monthly", 0, 0, None, 31))
	fires = spec.preview(4, datetime(2025, 1, 1, tzinfo=timezone.utc))
	assert [f.strftime("%m-%d") for f in fires] == ["01-31", "03-31", "05-31", "07-31"]


@pytest.mark.parametrize(
	"args, message",
	[
		(("Yearly", 0, 0, None, 30, "February"), "day_of_month '30': February has no day 30; pick a day from 1 to 29"),
		(("Yearly", 0, 0, None, 31, "April"), "day_of_month '31': April has no day 31; pick a day from 1 to 30"),
		(("Daily", 61, 0), "minute '61': minute 61 is outside 0-59"),
		(("Daily", 0, 24), "hour '24': hour 24 is outside 0-23"),
		(("Daily", "x", 0), "minute 'x': must be a whole number"),
		(
			("Weekly", 0, 0, "Funday"),
			"day_of_week 'Funday': must be one of Monday, Tuesday, Wednesday, Thursday, Friday, Saturday, Sunday",
		),
		(("Yearly", 0, 0, None, 1, "Smarch"), "month 'Smarch': must be a month name, January to December"),
		(("Monthly", 0, 0, None, 32), "day_of_month '32': day of month 32 is outside 1-31"),
		(
			("Cron Style",),
			"run_frequency 'Cron Style': has no cron form; expected one of Hourly, Daily, Weekly, Monthly, Yearly",
		),
	],
)
def test_frequency_messages(args, message):
	with pytest.raises(ScheduleError) as info:
		frequency_to_cron(*args)
	assert str(info.value) == message


def test_zones():
	assert parse_zone("UTC") is timezone.utc
	assert parse_zone("+05:30").utcoffset(None).total_seconds() == 19800
	assert parse_zone("-08:00").utcoffset(None).total_seconds() == -28800
	assert parse_zone(None, "Europe/Berlin").key == "Europe/Berlin"
	assert parse_zone("", "America/New_York").key == "America/New_York"
	for bad in ("Mars/Olympus", "../../etc/passwd", "+25:00", "America"):
		with pytest.raises(ScheduleError) as info:
			parse_zone(bad)
		assert info.value.field == "time_zone"
	with pytest.raises(ScheduleError):
		parse_zone(None)


def test_from_row_defaults_and_zone_fallbacks():
	spec = ScheduleSpec.from_row({"name": "TS-1", "run_frequency": "Daily"}, system_time_zone=None)
	assert spec.kind == "cron" and spec.cron == "0 0 * * *"  # Daily at 00:00
	assert spec.zone_name == "Asia/Kolkata"  # Frappe v15's fallback
	assert (spec.catch_up_policy, spec.catch_up_window.total_seconds(), spec.catch_up_max) == ("fire_once", 86400, 10)
	assert (spec.overlap_policy, spec.run_limit, spec.jitter_secs) == ("allow", 0, 0)
	daily = {"name": "TS-1", "run_frequency": "Daily"}
	assert (
		ScheduleSpec.from_row({**daily, "time_zone": ""}, system_time_zone="Europe/Paris").zone_name == "Europe/Paris"
	)
	assert (
		ScheduleSpec.from_row({**daily, "time_zone": "+05:30"}, system_time_zone="Europe/Paris").zone_name == "+05:30"
	)


def test_from_row_interval_anchors():
	row = {
		"name": "TS-i",
		"run_frequency": "Interval",
		"every": 2,
		"every_unit": "Hours",
		"creation": "2025-01-01 10:00:00.5",
	}
	spec = ScheduleSpec.from_row(row, system_time_zone="Asia/Kolkata")
	first = spec.next_slot(datetime(2024, 1, 1, tzinfo=timezone.utc))
	assert first == datetime(2025, 1, 1, 6, 30, tzinfo=timezone.utc)  # creation (Kolkata) + 2 h
	# start_time is on the system zone's wall clock (Kolkata) as every Frappe Datetime; the description says the
	# instant in the schedule's zone.
	row["start_time"] = "2025-06-01 08:00:00"
	row["time_zone"] = "Europe/London"
	spec = ScheduleSpec.from_row(row, system_time_zone="Asia/Kolkata")
	assert spec.next_slot(datetime(2024, 1, 1, tzinfo=timezone.utc)) == datetime(2025, 6, 1, 2, 30, tzinfo=timezone.utc)
	assert spec.describe() == "Every 2 hours, from 2025-06-01 03:30:00 (Europe/London)"


def test_run_at_start_and_end_are_on_the_system_zones_clock_not_the_schedules():
	"""Frappe stores every Datetime as the system zone's wall clock (its Desk converts from the person's zone), so
	BTU reads Run At, Start and End so; the schedule's zone (New York here) places its recurrence only."""
	system, schedule = "Asia/Kolkata", "America/New_York"
	once = ScheduleSpec.from_row(
		{"run_frequency": "Once", "run_at": "2026-12-01 09:00:00", "time_zone": schedule}, system_time_zone=system
	)
	assert once.next_slot(datetime(2026, 1, 1, tzinfo=timezone.utc)) == datetime(
		2026, 12, 1, 3, 30, tzinfo=timezone.utc
	)
	daily = {"run_frequency": "Daily", "hour": 9, "minute": 0, "time_zone": schedule}
	bounded = ScheduleSpec.from_row(
		{**daily, "start_time": "2026-12-01 19:00:00", "end_time": "2026-12-03 19:00:00"}, system_time_zone=system
	)
	slots, after = [], datetime(2026, 11, 1, tzinfo=timezone.utc)
	while (after := bounded.next_slot(after)) is not None:
		slots.append(after)
	# 19:00 in Kolkata is 13:30Z: 09:00 in New York (14:00Z) of December 1 is inside, of December 3 outside.
	assert slots == [datetime(2026, 12, day, 14, tzinfo=timezone.utc) for day in (1, 2)]


def test_a_naive_datetime_on_an_unknown_system_zone_names_the_field():
	with pytest.raises(ScheduleError) as info:
		ScheduleSpec.from_row(
			{"run_frequency": "Daily", "time_zone": "UTC", "start_time": "2026-12-01 19:00:00"},
			system_time_zone="Mars/Olympus",
		)
	assert info.value.field == "start_time" and "System Settings" in str(info.value)


@pytest.mark.parametrize(
	"row, field",
	[
		({"run_frequency": "Cron Style"}, "cron_string"),
		({"run_frequency": "Interval"}, "every"),
		({"run_frequency": "Interval", "every": 0}, "every"),
		(
			{"run_frequency": "Interval", "every": 5, "every_unit": "Weeks", "start_time": "2025-01-01 00:00:00"},
			"every_unit",
		),
		({"run_frequency": "Interval", "every": 5}, "start_time"),
		({"run_frequency": "Once"}, "run_at"),
		({"run_frequency": "Once", "run_at": "tomorrow"}, "run_at"),
		({"run_frequency": "Fortnightly"}, "run_frequency"),
		({"catch_up_policy": "always"}, "catch_up_policy"),
		({"overlap_policy": "replace"}, "overlap_policy"),
		({"run_limit": -1}, "run_limit"),
		({"jitter_secs": "lots"}, "jitter_secs"),
		({"start_time": "2025-02-01 00:00:00", "end_time": "2025-01-01 00:00:00"}, "end_time"),
		({"time_zone": "Nowhere/Land"}, "time_zone"),
	],
)
def test_from_row_errors_name_the_field(row, field):
	with pytest.raises(ScheduleError) as info:
		ScheduleSpec.from_row({"run_frequency": "Daily", **row}, system_time_zone="UTC")
	assert info.value.field == field
	assert str(info.value).startswith(f"{field} '")


@pytest.mark.parametrize("row", [{"run_frequency": None}, {"run_frequency": ""}, {}], ids=["null", "empty", "absent"])
def test_a_row_without_run_frequency_is_invalid_not_daily(row):
	with pytest.raises(ScheduleError) as info:
		ScheduleSpec.from_row({"name": "TS-1", "hour": 0, "minute": 0, **row}, system_time_zone="UTC")
	assert str(info.value) == (
		"run_frequency '': is empty; "
		"set it to one of Hourly, Daily, Weekly, Monthly, Yearly, Cron Style, Interval, Once"
	)


def test_describe():
	def describe(cron, zone="America/New_York"):
		return ScheduleSpec(name="d", zone_name=zone, kind="cron", cron=cron).describe()

	assert describe("0 9 * * 1-5") == "At 09:00 AM, Monday through Friday (America/New_York)"
	assert describe("*/10 * * * * *", "UTC") == "Every 10 seconds (UTC)"
	once = ScheduleSpec.from_row(
		{"run_frequency": "Once", "run_at": "2025-07-04 12:00:00", "time_zone": "+05:30"},
		system_time_zone="Asia/Kolkata",
	)
	assert once.describe() == "Once, at 2025-07-04 12:00:00 (+05:30)"


@pytest.mark.parametrize("locale_name", ["C.UTF-8", "C", "POSIX"])
def test_describe_does_not_follow_the_process_locale(locale_name):
	"""cron-descriptor guesses the language and clock from locale.getlocale(): C.UTF-8 is en_US on
	Python 3.11 and "C" (24-hour) on 3.13+. BTU's text is the same under every locale and Python."""
	code = (
		"from btu.shared.schedule import ScheduleSpec; "
		"print(ScheduleSpec(name='d', zone_name='UTC', kind='cron', cron='30 14 * * 1-5').describe())"
	)
	env = {key: value for key, value in os.environ.items() if not key.startswith("LC_") and key != "LANG"}
	result = subprocess.run(
		[sys.executable, "-c", code],
		env={**env, "LC_ALL": locale_name},
		capture_output=True,
		text=True,
		timeout=patient(60),
	)
	assert result.returncode == 0, result.stderr
	assert result.stdout.strip() == "At 02:30 PM, Monday through Friday (UTC)"


def test_fingerprint_changes_with_every_semantic_field():
	base = ScheduleSpec.from_row(
		{"name": "TS-f", "run_frequency": "Cron Style", "cron_string": "0 9 * * *"}, system_time_zone="UTC"
	)
	prints = {base.fingerprint}
	for change in (
		{"cron_string": "0 10 * * *"},
		{"time_zone": "Europe/Rome"},
		{"jitter_secs": 5},
		{"run_limit": 3},
		{"catch_up_policy": "skip"},
		{"catch_up_window": 60},
		{"catch_up_max": 2},
		{"overlap_policy": "skip"},
		{"start_time": "2025-01-01 00:00:00"},
		{"end_time": "2030-01-01 00:00:00"},
		{"name": "TS-g"},
	):
		row = {"name": "TS-f", "run_frequency": "Cron Style", "cron_string": "0 9 * * *", **change}
		prints.add(ScheduleSpec.from_row(row, system_time_zone="UTC").fingerprint)
	assert len(prints) == 12
	again = ScheduleSpec.from_row(
		{"name": "TS-f", "run_frequency": "Cron Style", "cron_string": "0 9 * * *"}, system_time_zone="UTC"
	)
	assert again.fingerprint == base.fingerprint
