"""Every upgraded schedule whose moments change is listed, with the original's and BTU's next fires.

The five rows an independent upgrade run found firing elsewhere (issue 41), and what must not be listed.
"""

from __future__ import annotations

from datetime import datetime, timezone

import pytest

from btu.btu_core.upgrade.convert.moments import Reading, changed, describe, original_crons
from btu.btu_core.upgrade.convert.schedules import convert
from btu.shared.schedule import ScheduleSpec

pytestmark = pytest.mark.versions

# Winter in New York: the helpers below were saved then, so their stored UTC crons have its offset.
NOW = datetime(2026, 11, 29, 12, 0, tzinfo=timezone.utc)


def moved(row: dict, *, config_zone: str, system_zone: str, local_schema: bool = False):
	change = convert(row, local_schema=local_schema, config_zone=config_zone, system_zone=system_zone)
	return changed(
		row, change.values, local_schema=local_schema, config_zone=config_zone, system_zone=system_zone, now=NOW
	)


def hours(moments) -> set[str]:
	return {m.strftime("%a %H:%M") for m in moments}


@pytest.mark.parametrize(
	"config_zone, system_zone, row, original, now_fires",
	[
		# UTC set-up, site in Asia/Kolkata: Fri 02:00 IST saved as 20:30 UTC, its weekday not moved back.
		(
			"UTC",
			"Asia/Kolkata",
			{"run_frequency": "Weekly", "hour": 2, "minute": 0, "day_of_week": "Friday", "cron_string": "30 20 * * 5"},
			{"Fri 20:30"},
			{"Thu 20:30"},
		),
		# cron_time_zone America/New_York: the saved UTC cron read again as New York's wall clock.
		(
			"America/New_York",
			"America/New_York",
			{"run_frequency": "Daily", "hour": 9, "minute": 0, "cron_string": "0 14 * * *"},
			{"19:00"},
			{"14:00"},
		),
		(
			"America/New_York",
			"America/New_York",
			{"run_frequency": "Daily", "hour": 0, "minute": 45, "cron_string": "45 5 * * *"},
			{"10:45"},
			{"05:45"},
		),
		(
			"America/New_York",
			"America/New_York",
			{
				"run_frequency": "Weekly",
				"hour": 10,
				"minute": 30,
				"day_of_week": "Monday",
				"cron_string": "30 15 * * 1",
			},
			{"Mon 20:30"},
			{"Mon 15:30"},
		),
		(
			"America/New_York",
			"America/New_York",
			{"run_frequency": "Weekly", "hour": 2, "minute": 0, "day_of_week": "Friday", "cron_string": "0 7 * * 5"},
			{"Fri 12:00"},
			{"Fri 07:00"},
		),
	],
)
def test_the_reported_rows_are_listed_with_both_moments(config_zone, system_zone, row, original, now_fires):
	found = moved({"name": "TS-1", **row}, config_zone=config_zone, system_zone=system_zone)
	assert found is not None
	times = {m.strftime("%H:%M") for m in found.after}
	assert (hours(found.after) if " " in next(iter(now_fires)) else times) == now_fires
	# btu_scheduler_py's reading (weekdays 0-6, as the reviewer's) is the original's listed moment.
	before = found.before[Reading.CRONITER]
	assert (hours(before) if " " in next(iter(original)) else {m.strftime("%H:%M") for m in before}) == original
	text = describe(found)
	assert "the original BTU's" in text and "BTU's" in text


def test_a_helper_naming_a_weekday_lists_both_daemons_readings():
	row = {"name": "TS-2", "run_frequency": "Weekly", "hour": 2, "minute": 0, "day_of_week": "Friday"}
	row["cron_string"] = "30 20 * * 5"
	found = moved(row, config_zone="UTC", system_zone="Asia/Kolkata")
	# The Rust daemon's cron crate counted 1-7 from Sunday: its 5 was Thursday.
	assert hours(found.before[Reading.RUST]) == {"Thu 20:30"}
	assert hours(found.before[Reading.CRONITER]) == {"Fri 20:30"}
	assert Reading.RUST.value in describe(found) and Reading.CRONITER.value in describe(found)
	notes = convert(row, local_schema=False, config_zone="UTC", system_zone="Asia/Kolkata").notes
	assert any("names weekdays" in note for note in notes)


def test_the_cron_offered_to_keep_the_original_moments_gives_them():
	row = {"name": "TS-3", "run_frequency": "Daily", "hour": 9, "minute": 0, "cron_string": "0 14 * * *"}
	found = moved(row, config_zone="America/New_York", system_zone="America/New_York")
	cron, zone = found.keep
	assert (cron, zone) == ("0 14 * * *", "America/New_York")
	kept = ScheduleSpec(name="k", zone_name=zone, kind="cron", cron=cron).preview(3, found.since)
	assert tuple(kept) == found.before[Reading.CRONITER]
	assert f"make it Cron Style '{cron}' in {zone}" in describe(found)


def test_a_frozen_offset_is_listed_from_the_dst_change():
	# Daily 08:05 New York saved in summer: 12:05 UTC, which the original fired at 07:05 all winter.
	row = {"name": "TS-4", "run_frequency": "Daily", "hour": 8, "minute": 5, "cron_string": "5 12 * * *"}
	found = moved(row, config_zone="UTC", system_zone="America/New_York")
	assert {m.strftime("%H:%M") for m in found.before[Reading.CRONITER]} == {"12:05"}
	assert {m.strftime("%H:%M") for m in found.after} == {"13:05"}
	# Saved in winter (13:05 UTC) it agrees until March, and is listed from there.
	row["cron_string"] = "5 13 * * *"
	found = moved(row, config_zone="UTC", system_zone="America/New_York")
	assert found.since > datetime(2027, 3, 1, tzinfo=timezone.utc)
	assert {m.strftime("%H:%M") for m in found.after} == {"12:05"}


@pytest.mark.parametrize(
	"row, config_zone",
	[
		({"run_frequency": "Cron Style", "cron_string": "30 14 * * *"}, "UTC"),
		({"run_frequency": "Cron Style", "cron_string": "*/20 * * * *"}, "Asia/Kolkata"),
		({"run_frequency": "Cron Style", "cron_string": "0 9 * * *"}, "Asia/Kolkata"),
		({"run_frequency": "Daily", "hour": 14, "minute": 30, "cron_string": "30 14 * * *"}, "UTC"),
	],
)
def test_a_row_that_fires_as_before_is_not_listed(row, config_zone):
	assert moved({"name": "TS-5", **row}, config_zone=config_zone, system_zone="UTC") is None


def test_a_local_schema_cron_fires_as_btu_scheduler_py_read_it():
	row = {
		"name": "TS-6",
		"run_frequency": "Cron Style",
		"cron_string": "45 6 * * 1-5",
		"cron_timezone": "Europe/Paris",
	}
	assert moved(row, config_zone="UTC", system_zone="UTC", local_schema=True) is None
	# A v15.2 helper whose saved cron disagrees with its fields fires at its fields' time now: listed.
	row = {"name": "TS-7", "run_frequency": "Daily", "hour": 7, "minute": 0, "cron_string": "0 6 * * *"}
	found = moved(row | {"cron_timezone": "Asia/Kolkata"}, config_zone="UTC", system_zone="UTC", local_schema=True)
	assert {m.strftime("%H:%M") for m in found.after} == {"01:30"}


def test_a_weekday_the_rust_daemon_refused_never_fired_there():
	# Weekly Sunday wrote day 0, which the cron crate refuses: the Rust daemon never fired it.
	original = original_crons("0 9 * * 0", local_schema=False, zone="UTC", config_zone="UTC")
	assert original[Reading.RUST] is None
	row = {"name": "TS-8", "run_frequency": "Weekly", "hour": 9, "minute": 0, "day_of_week": "Sunday"}
	found = moved(row | {"cron_string": "0 9 * * 0"}, config_zone="UTC", system_zone="UTC")
	assert found.before[Reading.RUST] == ()
	assert "no moment (its daemon refused the cron)" in describe(found)


def test_the_rust_daemon_needed_both_day_fields():
	original = original_crons("0 9 13 * 6", local_schema=False, zone="UTC", config_zone="UTC")[Reading.RUST]
	# 6 is Friday to the cron crate: Friday the 13th only.
	assert {(m.day, m.strftime("%a")) for m in original.moments(NOW) if m.year < 2028} == {(13, "Fri")}


def test_a_zone_that_is_not_one_reads_as_utc():
	original = original_crons("0 9 * * *", local_schema=False, zone="UTC", config_zone="Mars/Olympus")
	assert next(original[Reading.CRONITER].moments(NOW)).strftime("%H:%M") == "09:00"
