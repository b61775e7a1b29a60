"""plan(): catch-up policies, window, cap, run_limit, start/end, jitter."""

from __future__ import annotations

import time
from datetime import datetime, timedelta, timezone

import pytest

from btu.shared.schedule import ScheduleError, ScheduleSpec
from btu.shared.schedule.catch_up import MAX_CATCH_UP, MAX_FIRES_PER_PLAN

pytestmark = pytest.mark.versions

UTC = timezone.utc


def at(*args) -> datetime:
	return datetime(*args, tzinfo=UTC)


def five_minutely(**kw) -> ScheduleSpec:
	kw.setdefault("catch_up_window", 3600)
	return ScheduleSpec(name="TS-plan", zone_name="UTC", kind="cron", cron="*/5 * * * *", **kw)


def test_on_time_slot_fires_and_cursor_moves_on():
	plan = five_minutely().plan(at(2025, 1, 1, 12), at(2025, 1, 1, 12, 0, 3))
	assert plan.fire == [at(2025, 1, 1, 12)]
	assert (plan.skipped, plan.expired, plan.finished, plan.count_truncated) == (0, 0, False, False)
	assert plan.next_cursor == at(2025, 1, 1, 12, 5)


def test_nothing_due_yet():
	plan = five_minutely().plan(at(2025, 1, 1, 12, 5), at(2025, 1, 1, 12, 4, 59))
	assert plan.fire == [] and plan.next_cursor == at(2025, 1, 1, 12, 5)


def test_grace_covers_a_late_leader():
	spec = five_minutely(catch_up_policy="skip")
	assert spec.plan(at(2025, 1, 1, 12), at(2025, 1, 1, 12, 0, 10)).fire == [at(2025, 1, 1, 12)]
	late = spec.plan(at(2025, 1, 1, 12), at(2025, 1, 1, 12, 0, 11))
	assert late.fire == [] and late.skipped == 1
	assert spec.plan(at(2025, 1, 1, 12), at(2025, 1, 1, 12, 0, 30), grace=timedelta(seconds=60)).fire == [
		at(2025, 1, 1, 12)
	]


@pytest.mark.parametrize(
	"policy, fire, skipped",
	[
		("skip", [], 12),
		("fire_once", [at(2025, 1, 1, 11, 55)], 11),
		("fire_all", [at(2025, 1, 1, 11, 45), at(2025, 1, 1, 11, 50), at(2025, 1, 1, 11, 55)], 9),
	],
)
def test_policies_over_a_window(policy, fire, skipped):
	# Cursor 3 hours back, window 1 hour: slots 09:00..10:55 expired (24), 11:00..11:55 missed (12).
	spec = five_minutely(catch_up_policy=policy, catch_up_max=3)
	plan = spec.plan(at(2025, 1, 1, 9), at(2025, 1, 1, 11, 59))
	assert plan.fire == fire
	assert (plan.skipped, plan.expired) == (skipped, 24)
	assert plan.next_cursor == at(2025, 1, 1, 12)


def test_slot_exactly_window_old_is_not_expired():
	spec = five_minutely(catch_up_policy="fire_all", catch_up_max=100)
	plan = spec.plan(at(2025, 1, 1, 11), at(2025, 1, 1, 12))
	assert plan.expired == 0 and plan.fire[0] == at(2025, 1, 1, 11) and len(plan.fire) == 13
	later = spec.plan(at(2025, 1, 1, 11), at(2025, 1, 1, 12, 0, 1))
	assert later.expired == 1 and later.fire[0] == at(2025, 1, 1, 11, 5)


def test_on_time_slots_fire_even_with_skip_and_they_come_after_catch_up():
	spec = ScheduleSpec(
		name="s",
		zone_name="UTC",
		kind="interval",
		every=2,
		origin=int(at(2025, 1, 1).timestamp()),
		catch_up_policy="fire_once",
	)
	plan = spec.plan(at(2025, 1, 1), at(2025, 1, 1, 0, 1))
	assert plan.fire[0] == at(2025, 1, 1, 0, 0, 48)  # latest missed
	assert plan.fire[1:] == [at(2025, 1, 1, 0, 0, s) for s in range(50, 60, 2)] + [at(2025, 1, 1, 0, 1)]
	assert plan.skipped == 24


def test_huge_interval_backlog_is_counted_exactly_without_walking():
	spec = ScheduleSpec(
		name="s",
		zone_name="UTC",
		kind="interval",
		every=1,
		origin=int(at(2020, 1, 1).timestamp()),
		catch_up_policy="fire_all",
		catch_up_max=2,
	)
	plan = spec.plan(at(2020, 1, 1), at(2025, 1, 1))
	day = 86400
	total = int((at(2025, 1, 1) - at(2020, 1, 1)).total_seconds()) + 1
	assert plan.expired == total - day - 1
	on_time = 11
	assert plan.skipped == day + 1 - on_time - 2
	assert len(plan.fire) == 2 + on_time and not plan.count_truncated


def test_huge_cron_backlog_stops_counting_and_says_so():
	spec = ScheduleSpec(name="s", zone_name="UTC", kind="cron", cron="* * * * * *", catch_up_policy="fire_once")
	plan = spec.plan(at(2024, 1, 1), at(2025, 1, 1))
	assert plan.count_truncated
	assert plan.expired == 10_000
	assert plan.fire[0] == at(2024, 12, 31, 23, 59, 49)
	assert plan.fire[-1] == at(2025, 1, 1) and len(plan.fire) == 12


def test_cron_backlog_below_budget_is_exact():
	spec = ScheduleSpec(name="s", zone_name="UTC", kind="cron", cron="* * * * *", catch_up_policy="skip")
	plan = spec.plan(at(2025, 1, 1), at(2025, 1, 4, 0, 0, 1))
	assert (plan.expired, plan.skipped, plan.count_truncated) == (
		2 * 1440 + 1,
		1440 - 1,
		False,
	)  # Jan 1 00:00 .. Jan 3 00:00 expired
	assert plan.fire == [at(2025, 1, 4)]


def test_run_limit_caps_and_finishes():
	spec = five_minutely(catch_up_policy="fire_all", catch_up_max=10, run_limit=5)
	plan = spec.plan(at(2025, 1, 1, 11), at(2025, 1, 1, 11, 59), runs=3)
	# 12 missed, the cap keeps 11:10..11:55, the limit keeps the oldest two.
	assert plan.fire == [at(2025, 1, 1, 11, 10), at(2025, 1, 1, 11, 15)]
	assert plan.finished and plan.next_cursor is None
	done = spec.plan(at(2025, 1, 1, 12), at(2025, 1, 1, 12), runs=5)
	assert done.fire == [] and done.finished


def test_start_and_end_bound_slots():
	start, end = int(at(2025, 1, 1, 10).timestamp()), int(at(2025, 1, 1, 10, 10).timestamp())
	spec = five_minutely(start=start, end=end)
	assert spec.next_slot(at(2025, 1, 1)) == at(2025, 1, 1, 10)
	assert spec.preview(10, at(2025, 1, 1)) == [at(2025, 1, 1, 10), at(2025, 1, 1, 10, 5), at(2025, 1, 1, 10, 10)]
	last = spec.plan(at(2025, 1, 1, 10, 10), at(2025, 1, 1, 10, 10, 1))
	assert last.fire == [at(2025, 1, 1, 10, 10)] and last.finished and last.next_cursor is None


def test_once_fires_once_then_finishes():
	row = {"name": "TS-once", "run_frequency": "Once", "run_at": "2025-03-09 02:30:00", "time_zone": "America/New_York"}
	spec = ScheduleSpec.from_row(row, system_time_zone="America/New_York")  # run_at is on the system zone's clock
	assert spec.kind == "once"
	assert spec.next_slot(at(2025, 1, 1)) == at(2025, 3, 9, 7)  # inside the gap: the transition instant
	plan = spec.plan(at(2025, 1, 1), at(2025, 3, 9, 7, 0, 1))
	assert plan.fire == [at(2025, 3, 9, 7)] and plan.finished and plan.next_cursor is None


@pytest.mark.parametrize(
	"run_at",
	[
		"2025-01-01T12:00:00.250Z",
		"2025-01-01T13:00:00.250+01:00",
		datetime(2025, 1, 1, 12, 0, 0, 250999, UTC),
		datetime(2025, 1, 1, 12, 0, 0, 250000),
	],
	ids=["utc-text", "offset-text", "aware", "naive-in-zone"],
)
def test_once_within_a_second_fires_at_its_millisecond(run_at):
	"""enqueue_at's moment: the slot is the whole second, the fire 250 ms into it; the fraction survives the stored
	spec."""
	spec = ScheduleSpec.from_row(
		{"name": "TS-ms", "run_frequency": "Once", "run_at": run_at, "time_zone": "UTC"}, system_time_zone="UTC"
	)
	assert (spec.at, spec.at_ms) == (int(at(2025, 1, 1, 12).timestamp()), 250)
	slot = at(2025, 1, 1, 12)
	assert spec.fire_time(slot) == slot + timedelta(milliseconds=250)
	assert ScheduleSpec.from_dict(spec.to_dict()).fire_time(slot) == slot + timedelta(milliseconds=250)
	assert spec.describe() == "Once, at 2025-01-01 12:00:00.250 (UTC)"
	assert spec.plan(at(2025, 1, 1), at(2025, 1, 1, 11, 59, 59, 900000)).fire == []
	plan = spec.plan(
		at(2025, 1, 1), at(2025, 1, 1, 12, 0, 0, 100000)
	)  # due within its second: prepared, released at .250
	assert plan.fire == [slot] and plan.finished


def test_a_whole_second_once_keeps_its_fingerprint():
	"""Specs stored before milliseconds existed must not read as changed (no rebuild, no refire)."""
	spec = ScheduleSpec(name="TS-once", zone_name="UTC", kind="once", at=1735732800)
	assert "at_ms" not in spec.to_dict()
	assert spec.fire_time(at(2025, 1, 1, 12)) == at(2025, 1, 1, 12)


@pytest.mark.parametrize("kind, at_ms", [("once", 1000), ("once", -1), ("once", 2.5), ("once", True), ("cron", 250)])
def test_milliseconds_out_of_range_or_on_another_kind_are_refused(kind, at_ms):
	extra = {"cron": "* * * * *"} if kind == "cron" else {"at": 1735732800}
	with pytest.raises(ScheduleError) as refused:
		ScheduleSpec(name="TS", zone_name="UTC", kind=kind, at_ms=at_ms, **extra)
	assert "run_at" in str(refused.value) and "0 to 999" in str(refused.value)


def test_jitter_delays_due_time_deterministically():
	spec = ScheduleSpec(name="TS-j", zone_name="UTC", kind="cron", cron="0 * * * *", jitter_secs=600)
	slot = at(2025, 1, 1, 12)
	fire = spec.fire_time(slot)
	assert timedelta(0) <= fire - slot <= timedelta(seconds=600)
	assert fire == ScheduleSpec.from_dict(spec.to_dict()).fire_time(slot)
	assert len({spec.fire_time(at(2025, 1, 1, h)) - at(2025, 1, 1, h) for h in range(24)}) > 1
	if fire > slot:
		early = spec.plan(slot, fire - timedelta(seconds=1))
		assert early.fire == [] and early.next_cursor == slot
	assert spec.plan(slot, fire).fire == [slot]
	other = ScheduleSpec(name="TS-k", zone_name="UTC", kind="cron", cron="0 * * * *", jitter_secs=600)
	assert [other.fire_time(at(2025, 1, 1, h)) for h in range(24)] != [
		spec.fire_time(at(2025, 1, 1, h)) for h in range(24)
	]


def test_jitter_never_reaches_the_next_slot():
	spec = ScheduleSpec(name="TS-j", zone_name="UTC", kind="cron", cron="*/10 * * * * *", jitter_secs=3600)
	for s in range(0, 600, 10):
		slot = at(2025, 1, 1, 0, s // 60, s % 60)
		assert spec.fire_time(slot) - slot < timedelta(seconds=10)


@pytest.mark.parametrize("catch_up_max", [MAX_CATCH_UP + 1, 604_801, 2**31 - 1])
def test_catch_up_max_over_the_cap_is_refused_naming_the_limit(catch_up_max):
	row = {
		"name": "TS-cap",
		"run_frequency": "Cron Style",
		"cron_string": "* * * * * *",
		"catch_up_policy": "fire_all",
		"catch_up_max": catch_up_max,
	}
	with pytest.raises(ScheduleError) as info:
		ScheduleSpec.from_row(row, system_time_zone="UTC")
	assert info.value.field == "catch_up_max"
	assert f"must be from 0 to {MAX_CATCH_UP}" in str(info.value) and "use fire_once" in str(info.value)
	stored = {
		**ScheduleSpec.from_row({**row, "catch_up_max": 1}, system_time_zone="UTC").to_dict(),
		"catch_up_max": catch_up_max,
	}
	with pytest.raises(ScheduleError):
		ScheduleSpec.from_dict(stored)  # a spec kept in Redis by an older version is refused the same way


@pytest.mark.parametrize("kind", ["cron", "interval"])
def test_a_weeks_outage_fires_the_cap_in_bounded_steps(kind):
	"""fire_all with the largest cap on a one-second schedule after a week: no plan lists more than MAX_FIRES_PER_PLAN
	slots."""
	origin = int(at(2025, 1, 1).timestamp())
	shape = {"cron": {"cron": "* * * * * *"}, "interval": {"every": 1, "origin": origin}}[kind]
	spec = ScheduleSpec(
		name="s",
		zone_name="UTC",
		kind=kind,
		catch_up_policy="fire_all",
		catch_up_max=MAX_CATCH_UP,
		catch_up_window=8 * 86400,
		**shape,
	)
	now = at(2025, 1, 8)
	cursor, fired, skipped, steps = at(2025, 1, 1), [], 0, 0
	while cursor is not None and cursor <= now:
		# A step's bound is what it lists, not how long it took (a loaded machine took 2.2 s once): speed is
		# benchmarks/'s to measure.
		plan = spec.plan(cursor, now)
		assert 0 < len(plan.fire) <= MAX_FIRES_PER_PLAN
		fired += plan.fire
		skipped += plan.skipped
		cursor, steps = plan.next_cursor, steps + 1
	on_time = 11  # the default 10 s grace, both ends
	assert len(fired) == MAX_CATCH_UP + on_time and steps == -(-(MAX_CATCH_UP + on_time) // MAX_FIRES_PER_PLAN)
	assert fired == sorted(set(fired)), "each slot once, oldest first"
	assert fired[-1] == now and fired[0] == now - timedelta(seconds=MAX_CATCH_UP + on_time - 1)
	if kind == "interval":  # exact counts (cron counts stop at the enumeration budget)
		assert skipped == 7 * 86400 + 1 - len(fired)


def test_run_limit_beyond_a_step_finishes_in_the_step_that_reaches_it():
	spec = ScheduleSpec(
		name="s",
		zone_name="UTC",
		kind="cron",
		cron="* * * * * *",
		catch_up_policy="fire_all",
		catch_up_max=5000,
		run_limit=1500,
	)
	first = spec.plan(at(2025, 1, 1), at(2025, 1, 1, 2))
	assert len(first.fire) == MAX_FIRES_PER_PLAN and not first.finished
	second = spec.plan(first.next_cursor, at(2025, 1, 1, 2), runs=MAX_FIRES_PER_PLAN)
	assert len(second.fire) == 500 and second.finished and second.next_cursor is None
	assert second.fire[0] == first.fire[-1] + timedelta(seconds=1)


def test_fire_all_keeps_every_missed_slot_when_the_count_budget_runs_out_inside_the_backlog():
	# Expired slots use most of the count budget; the missed ones after them (fewer than catch_up_max)
	# are found by looking back: every one of them must fire, none reported skipped.
	spec = ScheduleSpec(
		name="TS-plan",
		zone_name="UTC",
		kind="cron",
		cron="* * * * * *",
		catch_up_policy="fire_all",
		catch_up_max=MAX_CATCH_UP,
		catch_up_window=7000,
	)
	now = at(2025, 1, 1, 12)
	plan = spec.plan(now - timedelta(seconds=15000), now)
	assert plan.skipped == 0
	assert plan.fire[0] == now - timedelta(seconds=7000), "the oldest slot inside the window fires first"
	assert plan.fire == [now - timedelta(seconds=7000 - i) for i in range(MAX_FIRES_PER_PLAN)]
	assert plan.expired == 8000
