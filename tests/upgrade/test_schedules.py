"""An original schedule row converted: its next five moments are the ones the original computed.

The original, in our words: before v15.2 a cron was UTC (the daemon read it in BTU Configuration's
cron_time_zone, UTC by default; another zone made it read an hour-restricted cron as that zone's wall clock),
and the helpers were saved as a UTC cron with the day's offset; from v15.2 a cron is local in the schedule's
cron_timezone, else cron_time_zone, read with croniter.
"""

from __future__ import annotations

from datetime import datetime, timezone
from zoneinfo import ZoneInfo

import pytest
from croniter import croniter

from btu.btu_core.upgrade.convert.schedules import HourError, convert, hour_number
from btu.shared.schedule import ScheduleSpec
from btu.shared.schedule.row import SPEC_FIELDS

pytestmark = pytest.mark.versions

# A week with no DST change in any zone used here.
NOW = datetime(2026, 6, 10, 7, 13, tzinfo=timezone.utc)


def original_local(cron: str, zone: str, n: int = 5) -> list[datetime]:
	"""btu_scheduler_py's next fires: croniter on the zone's wall clock, back to UTC."""
	# Stepped on the naive wall clock, which every croniter steps right, then placed in the zone (no fire in a gap).
	it = croniter(cron, NOW.astimezone(ZoneInfo(zone)).replace(tzinfo=None))
	return [it.get_next(datetime).replace(tzinfo=ZoneInfo(zone)).astimezone(timezone.utc) for _ in range(n)]


def converted_moments(row: dict, *, local_schema: bool, config_zone: str | None, system_zone: str) -> list[datetime]:
	change = convert(row, local_schema=local_schema, config_zone=config_zone, system_zone=system_zone)
	merged = {key: row.get(key) for key in SPEC_FIELDS} | change.values
	spec = ScheduleSpec.from_row(merged, system_time_zone=system_zone)
	return spec.preview(5, NOW)


@pytest.mark.parametrize("cron", ["30 14 * * *", "*/20 * * * *", "0 9 * * 1-5", "15 2 1 * *"])
def test_utc_schema_cron_keeps_its_utc_moments(cron):
	row = {"name": "TS-1", "run_frequency": "Cron Style", "cron_string": cron}
	moments = converted_moments(row, local_schema=False, config_zone="UTC", system_zone="America/New_York")
	assert moments == original_local(cron, "UTC")


def test_utc_schema_read_in_another_cron_time_zone():
	# An hour-restricted cron was read as Asia/Kolkata's wall clock; one with hour * stayed UTC.
	row = {"name": "TS-2", "run_frequency": "Cron Style", "cron_string": "0 9 * * *"}
	assert converted_moments(row, local_schema=False, config_zone="Asia/Kolkata", system_zone="UTC") == original_local(
		"0 9 * * *", "Asia/Kolkata"
	)
	row = {"name": "TS-3", "run_frequency": "Cron Style", "cron_string": "30 * * * *"}
	assert converted_moments(row, local_schema=False, config_zone="Asia/Kolkata", system_zone="UTC") == original_local(
		"30 * * * *", "UTC"
	)


@pytest.mark.parametrize(
	"own_zone, config_zone, zone",
	[("America/Chicago", "UTC", "America/Chicago"), ("", "Europe/Berlin", "Europe/Berlin"), (None, None, "UTC")],
)
def test_local_schema_cron_in_its_zone(own_zone, config_zone, zone):
	row = {"name": "TS-4", "run_frequency": "Cron Style", "cron_string": "45 6 * * 1-5", "cron_timezone": own_zone}
	assert converted_moments(
		row, local_schema=True, config_zone=config_zone, system_zone="Asia/Tokyo"
	) == original_local("45 6 * * 1-5", zone)


def test_utc_schema_helper_fires_at_its_local_time():
	# Saved this week, the helper's UTC cron had today's offset: the same moments as 08:05 New York.
	offset = NOW.astimezone(ZoneInfo("America/New_York")).utcoffset()
	utc_hour = (datetime(2026, 6, 10, 8, 5) - offset).hour
	row = {"name": "TS-5", "run_frequency": "Daily", "hour": 8, "minute": 5, "cron_string": f"5 {utc_hour} * * *"}
	moments = converted_moments(row, local_schema=False, config_zone="UTC", system_zone="America/New_York")
	assert moments == original_local(f"5 {utc_hour} * * *", "UTC")
	assert {m.astimezone(ZoneInfo("America/New_York")).strftime("%H:%M") for m in moments} == {"08:05"}


def test_weekly_and_yearly_helpers_keep_their_fields():
	row = {"name": "TS-6", "run_frequency": "Yearly", "hour": 4, "minute": 0, "month": "MAR", "day_of_month": 2}
	change = convert(row, local_schema=True, config_zone="UTC", system_zone="UTC")
	assert change.values == {"time_zone": "UTC", "month": "March"}
	row = {"name": "TS-7", "run_frequency": "Monthly", "hour": 4, "minute": 0, "day_of_month": 2}
	assert any(
		"never fired" in note for note in convert(row, local_schema=False, config_zone="UTC", system_zone="UTC").notes
	)


def test_converting_a_converted_row_changes_nothing():
	row = {"name": "TS-8", "run_frequency": "Cron Style", "cron_string": "0 9 * * *", "cron_timezone": "Europe/Paris"}
	first = convert(row, local_schema=True, config_zone="UTC", system_zone="UTC")
	assert convert(row | first.values, local_schema=True, config_zone="UTC", system_zone="UTC").values == {}


def test_bad_zone_is_listed_not_guessed_silently():
	row = {"name": "TS-9", "run_frequency": "Cron Style", "cron_string": "0 9 * * *", "cron_timezone": "Mars/Olympus"}
	change = convert(row, local_schema=True, config_zone="UTC", system_zone="UTC")
	assert change.values["time_zone"] == "UTC"
	assert any("Mars/Olympus" in note for note in change.notes)


def test_weekday_crons_of_the_utc_schema_are_flagged():
	row = {"name": "TS-10", "run_frequency": "Cron Style", "cron_string": "0 9 * * 1-5"}
	assert any(
		"weekdays" in note for note in convert(row, local_schema=False, config_zone="UTC", system_zone="UTC").notes
	)


@pytest.mark.parametrize("text, hour", [("9", 9), (" 23 ", 23), ("", None), (None, None), (7, 7)])
def test_hour_text_as_a_number(text, hour):
	assert hour_number(text) == hour


@pytest.mark.parametrize("text", ["24", "9am", "-1", "9.5"])
def test_hour_that_is_not_one_names_the_field(text):
	with pytest.raises(HourError) as caught:
		hour_number(text)
	assert str(caught.value).startswith(f"hour '{text}'")
