"""The missed-fire alert's slots: due by fire time + grace, after `since`, newest kept."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

import pytest

from btu.btu_core.alerts.overdue_slots import overdue_slots
from btu.shared.schedule import ScheduleSpec

pytestmark = pytest.mark.versions

T0 = datetime(2026, 11, 22, 2, 0, tzinfo=timezone.utc)


def spec(**row) -> ScheduleSpec:
	base = {
		"name": "TS-1",
		"creation": "2026-11-01 00:00:00",
		"time_zone": "UTC",
		"run_frequency": "Cron Style",
		"cron_string": "*/10 * * * *",
	}
	return ScheduleSpec.from_row({**base, **row}, system_time_zone="UTC")


def test_slots_past_their_deadline_after_since():
	got = overdue_slots(spec(), since=T0, now=T0 + timedelta(minutes=34), grace_secs=300)
	# 02:10 and 02:20 are past 5 minutes of grace; 02:30 is not yet; 02:00 is `since` itself.
	assert got == [T0 + timedelta(minutes=10), T0 + timedelta(minutes=20)]


def test_grace_reaching_the_slot_exactly_counts_it():
	assert overdue_slots(spec(), since=T0, now=T0 + timedelta(minutes=15), grace_secs=300) == [
		T0 + timedelta(minutes=10)
	]


def test_jitter_moves_the_deadline():
	jittered = spec(jitter_secs=240)
	slot = T0 + timedelta(minutes=10)
	fire = jittered.fire_time(slot)
	assert overdue_slots(jittered, since=T0, now=fire + timedelta(seconds=59), grace_secs=60) == []
	assert overdue_slots(jittered, since=T0, now=fire + timedelta(seconds=60), grace_secs=60) == [slot]


def test_only_the_newest_are_kept_and_a_dense_schedule_stays_bounded():
	every_second = spec(run_frequency="Interval", every=1, every_unit="Seconds", start_time="2026-11-22 00:00:00")
	now = T0 + timedelta(hours=6)
	# 6 hours is 21,600 slots, more than one walk's step cap: the newest are still the ones kept.
	got = overdue_slots(every_second, since=T0, now=now, grace_secs=0, limit=3)
	assert got == [now - timedelta(seconds=2), now - timedelta(seconds=1), now]
	assert overdue_slots(every_second, since=T0, now=now, grace_secs=60, limit=1) == [now - timedelta(seconds=60)]


def test_a_once_schedule_and_an_ended_one():
	once = spec(run_frequency="Once", run_at="2026-11-22 02:05:00")
	assert overdue_slots(once, since=T0, now=T0 + timedelta(hours=1), grace_secs=60) == [T0 + timedelta(minutes=5)]
	ended = spec(end_time="2026-11-22 02:15:00")
	assert overdue_slots(ended, since=T0, now=T0 + timedelta(hours=1), grace_secs=60) == [T0 + timedelta(minutes=10)]
