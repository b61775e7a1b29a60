"""DST matrix: every offset change of 2025-2027 in 13 zones (plus Apia's
skipped day in 2011), fixed-time and real-time expressions.

The expected fires are computed here by brute force, independently of
btu.shared.schedule: walk UTC minute by minute across a window around each
change, read the local wall time with zoneinfo, and apply Debian cron(8)'s
rule directly.
"""

from __future__ import annotations

from datetime import datetime, timedelta, timezone
from zoneinfo import ZoneInfo

import pytest

from btu.shared.schedule import ScheduleSpec

pytestmark = pytest.mark.versions

ZONES = (
	"America/New_York",
	"Europe/London",
	"Europe/Dublin",
	"Europe/Berlin",
	"Australia/Sydney",
	"Australia/Lord_Howe",
	"Pacific/Chatham",
	"America/St_Johns",
	"America/Santiago",
	"America/Havana",
	"Asia/Kolkata",
	"UTC",
	"Pacific/Apia",
)
ALL = set(range(60))
# expression -> (minutes, hours, days of week with Sunday = 0 or None for any)
FIXED = {
	"30 2 * * *": ({30}, {2}, None),
	"0 1 * * *": ({0}, {1}, None),
	"0 0 * * *": ({0}, {0}, None),
	"15,45 0-3 * * *": ({15, 45}, {0, 1, 2, 3}, None),
	"0 3 * * *": ({0}, {3}, None),
	"30 1 * * 0": ({30}, {1}, {0}),
}
REAL_TIME = {
	"*/15 * * * *": (set(range(0, 60, 15)), set(range(24)), None),
	"0 * * * *": ({0}, set(range(24)), None),
	"30 * * * *": ({30}, set(range(24)), None),
	"* 2 * * *": (ALL, {2}, None),
	"*/20 1-3 * * *": ({0, 20, 40}, {1, 2, 3}, None),
}
HALF_WINDOW = 26 * 3600


def transitions(zone: str) -> list[int]:
	"""Hours (UTC, epoch seconds) in which the zone's offset changes, 2025-2027."""
	tz = ZoneInfo(zone)
	out = []
	start = int(datetime(2025, 1, 1, tzinfo=timezone.utc).timestamp())
	stop = int(datetime(2028, 1, 1, tzinfo=timezone.utc).timestamp())
	previous = datetime.fromtimestamp(start, tz).utcoffset()
	for hour in range(start + 3600, stop, 3600):
		offset = datetime.fromtimestamp(hour, tz).utcoffset()
		if offset != previous:
			out.append(hour)
		previous = offset
	return out


def windows() -> list[tuple[str, int]]:
	cases = []
	for zone in ZONES:
		if zone == "Pacific/Apia":
			cases.append((zone, int(datetime(2011, 12, 30, 10, tzinfo=timezone.utc).timestamp())))
			continue
		found = transitions(zone)
		if zone in ("Asia/Kolkata", "UTC"):
			assert found == []
			found = [
				int(datetime(y, m, 8, tzinfo=timezone.utc).timestamp()) for y in (2025, 2026, 2027) for m in (3, 11)
			]
		else:
			assert len(found) == 6, (zone, found)  # two changes a year
		cases += [(zone, hour) for hour in found]
	return cases


def brute_force(zone: str, center: int, fields, real_time: bool) -> list[int]:
	minutes, hours, dows = fields
	tz = ZoneInfo(zone)

	def wall(u: int) -> datetime:
		return datetime.fromtimestamp(u, tz).replace(tzinfo=None)

	def matches(w: datetime) -> bool:
		return w.minute in minutes and w.hour in hours and (dows is None or (w.weekday() + 1) % 7 in dows)

	start, stop = center - HALF_WINDOW, center + HALF_WINDOW
	fires = []
	highest = wall(start)
	previous = highest
	for u in range(start + 60, stop, 60):
		w = wall(u)
		if real_time:
			hit = matches(w)
		elif w <= highest:
			hit = False  # a repeated wall time fired at its first occurrence
		else:
			skipped = previous + timedelta(minutes=1)
			hit = matches(w)
			while not hit and skipped < w:
				hit = matches(skipped)  # a skipped time fires at the first instant after the gap
				skipped += timedelta(minutes=1)
		if hit:
			fires.append(u)
		highest = max(highest, w)
		previous = w
	return fires


def computed(zone: str, center: int, expression: str) -> list[int]:
	spec = ScheduleSpec(name="matrix", zone_name=zone, kind="cron", cron=expression)
	start, stop = center - HALF_WINDOW, center + HALF_WINDOW
	fires = []
	slot = spec.next_slot(datetime.fromtimestamp(start, timezone.utc))
	while slot is not None and slot.timestamp() < stop:
		fires.append(int(slot.timestamp()))
		slot = spec.next_slot(slot)
	return fires


CASES = windows()


def label(case: tuple[str, int]) -> str:
	return f"{case[0]}@{datetime.fromtimestamp(case[1], timezone.utc):%Y-%m-%dT%H}Z"


@pytest.mark.parametrize("case", CASES, ids=[label(c) for c in CASES])
def test_fixed_and_real_time_expressions_follow_the_rule(case):
	zone, center = case
	for table, real_time in ((FIXED, False), (REAL_TIME, True)):
		for expression, fields in table.items():
			expected = brute_force(zone, center, fields, real_time)
			got = computed(zone, center, expression)
			assert got == expected, (
				expression,
				[datetime.fromtimestamp(u, ZoneInfo(zone)).isoformat() for u in sorted(set(got) ^ set(expected))],
			)


def test_matrix_covers_every_required_zone_and_gap_kind():
	zones = {zone for zone, _ in CASES}
	assert len(zones) >= 12
	lord_howe = transitions("Australia/Lord_Howe")
	tz = ZoneInfo("Australia/Lord_Howe")
	shifts = {
		(datetime.fromtimestamp(h + 3600, tz).utcoffset() - datetime.fromtimestamp(h - 3600, tz).utcoffset())
		for h in lord_howe
	}
	assert shifts == {timedelta(minutes=30), timedelta(minutes=-30)}


def test_apia_skipped_day_fires_once_at_the_transition():
	spec = ScheduleSpec(name="apia", zone_name="Pacific/Apia", kind="cron", cron="0 9 * * *")
	fires = spec.preview(3, datetime(2011, 12, 29, 12, tzinfo=timezone.utc))
	local = [f.astimezone(ZoneInfo("Pacific/Apia")).isoformat() for f in fires]
	assert local == ["2011-12-29T09:00:00-10:00", "2011-12-31T00:00:00+14:00", "2011-12-31T09:00:00+14:00"]


def test_new_york_examples_from_the_issue():
	ny = ZoneInfo("America/New_York")
	after = datetime(2025, 3, 8, 12, tzinfo=ny)
	quarter = ScheduleSpec(name="q", zone_name="America/New_York", kind="cron", cron="*/15 * * * *")
	fires = quarter.preview(200, after)
	gaps = {b - a for a, b in zip(fires, fires[1:])}
	assert gaps == {timedelta(minutes=15)}  # every real 15 minutes through spring-forward
	fall = quarter.preview(12, datetime(2025, 11, 2, 0, 50, tzinfo=ny))
	assert {b - a for a, b in zip(fall, fall[1:])} == {timedelta(minutes=15)}
	assert [f.astimezone(ny).strftime("%H:%M%z") for f in fall[:10]] == [
		"01:00-0400",
		"01:15-0400",
		"01:30-0400",
		"01:45-0400",
		"01:00-0500",
		"01:15-0500",
		"01:30-0500",
		"01:45-0500",
		"02:00-0500",
		"02:15-0500",
	]
