"""Exclusions: slots skipped on request, calendars (skip or move excluded days), in the spec and the planner."""

from __future__ import annotations

from datetime import date, datetime, timedelta, timezone
from zoneinfo import ZoneInfo

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from btu.shared.schedule import ScheduleError, ScheduleSpec
from btu.shared.schedule.row import calendar_window
from btu.shared.schedule.spec import MAX_EXCLUDED_DATES, MAX_SKIPPED
from btu.shared.schedule.zones import DAY, clock_for, parse_zone, wall_seconds

pytestmark = pytest.mark.versions

UTC = timezone.utc
MOVE = "Move to next working day"


def at(*args) -> datetime:
	return datetime(*args, tzinfo=UTC)


def row(**kw) -> dict:
	base = {"name": "TS-x", "time_zone": "Europe/Paris", "run_frequency": "Daily", "hour": 9, "minute": 0}
	return {**base, **kw}


def spec(**kw) -> ScheduleSpec:
	return ScheduleSpec.from_row(row(**kw), system_time_zone=None)


def fires(s: ScheduleSpec, n: int, after: datetime) -> list[datetime]:
	return s.preview(n, after)


def test_no_exclusion_keeps_the_old_serialised_form_and_fingerprint():
	plain = spec()
	assert "skip" not in plain.to_dict() and "calendar" not in plain.to_dict()
	# An empty calendar, or a calendar link with no dates, is no exclusion: same fingerprint, nothing upserts.
	assert spec(calendar="Holidays", excluded_dates=[]).fingerprint == plain.fingerprint
	assert spec(skipped_slots=[]).fingerprint == plain.fingerprint
	assert spec(excluded_dates=["2026-12-05"]).fingerprint == plain.fingerprint  # dates without a calendar: none
	assert plain.to_dict()["v"] == 1


def test_skipped_slot_does_not_fire_and_round_trips():
	skipping = spec(skipped_slots=["2026-12-05T08:00:00Z"])
	assert fires(skipping, 3, at(2026, 12, 4)) == [at(2026, 12, 4, 8), at(2026, 12, 6, 8), at(2026, 12, 7, 8)]
	assert ScheduleSpec.from_dict(skipping.to_dict()) == skipping
	assert skipping.to_dict()["skip"] == [int(at(2026, 12, 5, 8).timestamp())]
	plan = skipping.plan(at(2026, 12, 5, 8), at(2026, 12, 5, 8, 0, 1))
	assert plan.fire == [] and plan.skipped == 0 and plan.next_cursor == at(2026, 12, 6, 8)


def test_skip_that_is_no_slot_changes_nothing_but_the_fingerprint():
	odd = spec(skipped_slots=["2026-12-05T08:00:01Z"])
	assert fires(odd, 3, at(2026, 12, 4)) == fires(spec(), 3, at(2026, 12, 4))


@pytest.mark.parametrize("bad", ["yesterday", "2026-13-01T00:00:00Z", "", "   "])
def test_garbage_skip_text_names_the_field(bad):
	with pytest.raises(ScheduleError) as caught:
		spec(skipped_slots=[bad])
	assert "skipped_slots" in str(caught.value)


def test_too_many_skips_are_refused():
	slots = ["2027-01-01T00:00:00Z"] * 5 + [
		(at(2027, 1, 1) + timedelta(days=i)).isoformat() for i in range(MAX_SKIPPED + 1)
	]
	with pytest.raises(ScheduleError) as caught:
		spec(skipped_slots=slots)
	assert str(MAX_SKIPPED) in str(caught.value)
	assert len(spec(skipped_slots=slots[:MAX_SKIPPED]).skipped) == MAX_SKIPPED - 5  # the first six are one instant


def test_calendar_skip_drops_excluded_local_dates():
	cal = spec(calendar="C", excluded_dates=["2026-12-05", "2026-12-06", "2026-12-06"])
	assert fires(cal, 2, at(2026, 12, 4)) == [at(2026, 12, 4, 8), at(2026, 12, 7, 8)]
	assert cal.to_dict()["calendar"] == {"policy": "skip", "dates": ["2026-12-05", "2026-12-06"]}


def test_excluded_dates_are_local_to_the_schedule_zone():
	# 23:30 in Kolkata on Dec 5 is 18:00 UTC on Dec 5; 04:00 in Kolkata on Dec 6 is Dec 5 22:30 UTC.
	late = spec(time_zone="Asia/Kolkata", hour=4, minute=0, calendar="C", excluded_dates=["2026-12-06"])
	assert at(2026, 12, 5, 22, 30) not in fires(late, 3, at(2026, 12, 4))
	assert at(2026, 12, 4, 22, 30) in fires(late, 3, at(2026, 12, 4))


def test_move_goes_to_the_same_wall_time_on_the_next_working_day_and_merges():
	weekly = spec(
		run_frequency="Weekly",
		day_of_week="Sunday",
		calendar="C",
		calendar_policy=MOVE,
		excluded_dates=["2026-12-06", "2026-12-07"],
	)
	assert fires(weekly, 2, at(2026, 12, 1)) == [at(2026, 12, 8, 8), at(2026, 12, 13, 8)]
	marked = weekly.preview_marked(2, at(2026, 12, 1))
	assert [(m["at"], m["mark"], m["moved_from"]) for m in marked] == [
		(at(2026, 12, 6, 8), "excluded", None),
		(at(2026, 12, 8, 8), "moved", date(2026, 12, 6)),
		(at(2026, 12, 13, 8), "", None),
	]
	daily = spec(calendar="C", calendar_policy=MOVE, excluded_dates=["2026-12-05", "2026-12-06"])
	# Saturday's and Sunday's 09:00 land on Monday's 09:00: one fire.
	assert fires(daily, 3, at(2026, 12, 4)) == [at(2026, 12, 4, 8), at(2026, 12, 7, 8), at(2026, 12, 8, 8)]


def test_move_into_a_spring_forward_gap_fires_at_the_transition_once():
	# Paris 2027-03-28: 02:00 -> 03:00 (01:00 UTC). Daily 02:30 is fixed-time: it fires at the transition that day.
	s = spec(hour=2, minute=30, calendar="C", calendar_policy=MOVE, excluded_dates=["2027-03-27"])
	assert fires(s, 3, at(2027, 3, 26, 12)) == [at(2027, 3, 28, 1), at(2027, 3, 29, 0, 30), at(2027, 3, 30, 0, 30)]


def test_move_over_a_fall_back_keeps_the_regular_second_pass():
	# Paris 2026-10-25: 03:00 -> 02:00 (01:00 UTC). "30 * * * *" is real-time: 02:30 fires in both passes.
	s = spec(
		run_frequency="Cron Style",
		cron_string="30 2 * * *",
		calendar="C",
		calendar_policy=MOVE,
		excluded_dates=["2026-10-24"],
	)
	assert fires(s, 2, at(2026, 10, 23, 12)) == [at(2026, 10, 25, 0, 30), at(2026, 10, 26, 1, 30)]
	real = spec(
		run_frequency="Cron Style",
		cron_string="30 * * * *",
		calendar="C",
		calendar_policy=MOVE,
		excluded_dates=["2026-10-24"],
	)
	sunday = [f for f in fires(real, 40, at(2026, 10, 24, 12)) if at(2026, 10, 24, 23) <= f < at(2026, 10, 25, 2)]
	assert sunday == [at(2026, 10, 24, 23, 30), at(2026, 10, 25, 0, 30), at(2026, 10, 25, 1, 30)]


def test_calendar_skip_on_a_dst_day():
	s = spec(run_frequency="Cron Style", cron_string="*/30 * * * *", calendar="C", excluded_dates=["2027-03-28"])
	got = fires(s, 2, at(2027, 3, 27, 22, 45))
	assert got == [at(2027, 3, 28, 22), at(2027, 3, 28, 22, 30)]  # Monday 00:00 CEST


def test_planner_never_fires_an_excluded_slot_in_a_catch_up():
	s = spec(
		calendar="C",
		excluded_dates=["2026-12-05"],
		catch_up_policy="fire_all",
		catch_up_window=7 * 86400,
		catch_up_max=10,
	)
	plan = s.plan(at(2026, 12, 4, 8), at(2026, 12, 7, 12))
	assert plan.fire == [at(2026, 12, 4, 8), at(2026, 12, 6, 8), at(2026, 12, 7, 8)]
	assert plan.next_cursor == at(2026, 12, 8, 8)


def test_interval_with_exclusions_counts_by_enumeration():
	s = ScheduleSpec.from_row(
		{
			"name": "TS-i",
			"time_zone": "UTC",
			"run_frequency": "Interval",
			"every": 1,
			"every_unit": "Hours",
			"start_time": "2026-12-01 00:00:00",
			"calendar": "C",
			"excluded_dates": ["2026-12-02"],
			"catch_up_policy": "skip",
			"catch_up_window": 10 * 86400,
		},
		system_time_zone="UTC",
	)
	plan = s.plan(at(2026, 12, 1), at(2026, 12, 3, 0, 0, 5))
	assert plan.fire == [at(2026, 12, 3)] and plan.skipped == 24  # Dec 1's 24 hours; Dec 2 is no slot at all


def test_jitter_stays_below_the_gap_to_the_next_remaining_slot():
	s = spec(
		run_frequency="Cron Style", cron_string="* * * * *", jitter_secs=3600, skipped_slots=["2026-12-05T08:01:00Z"]
	)
	assert s.jitter_of(int(at(2026, 12, 5, 8).timestamp())) < 120


@pytest.mark.parametrize("bad", ["2026-02-30", "05/12/2026", "tomorrow", 20261205, None])
def test_bad_dates_name_the_field(bad):
	with pytest.raises(ScheduleError) as caught:
		spec(calendar="C", excluded_dates=[bad])
	assert "excluded_dates" in str(caught.value)


def test_too_many_dates_are_refused_and_the_window_fits_the_bound():
	low, high = calendar_window(date(2026, 11, 24))
	assert (low, high) == (date(2025, 1, 1), date(2031, 12, 31))
	window = [low + timedelta(days=i) for i in range((high - low).days + 1)]
	assert len(window) <= MAX_EXCLUDED_DATES
	with pytest.raises(ScheduleError):
		spec(calendar="C", excluded_dates=[date(2020, 1, 1) + timedelta(days=i) for i in range(MAX_EXCLUDED_DATES + 1)])


def test_every_day_excluded_in_the_window_still_ends():
	low, high = calendar_window(date(2026, 11, 24))
	dates = [low + timedelta(days=i) for i in range((high - low).days + 1)]
	for policy in ("Skip excluded days", MOVE):
		s = spec(calendar="C", calendar_policy=policy, excluded_dates=dates)
		assert fires(s, 1, at(2026, 12, 1)) == [at(2032, 1, 1, 8)]


def test_bad_calendar_policy_and_stored_calendar():
	with pytest.raises(ScheduleError):
		spec(calendar="C", calendar_policy="Sometimes", excluded_dates=["2026-12-05"])
	d = spec(calendar="C", excluded_dates=["2026-12-05"]).to_dict()
	with pytest.raises(ScheduleError):
		ScheduleSpec.from_dict({**d, "calendar": "garbage"})
	with pytest.raises(ScheduleError):
		ScheduleSpec.from_dict({**d, "skip": "garbage"})


def test_preview_marks_skipped_and_excluded():
	s = spec(calendar="C", excluded_dates=["2026-12-06"], skipped_slots=["2026-12-05T08:00:00Z"])
	marks = [(m["at"], m["mark"]) for m in s.preview_marked(2, at(2026, 12, 4))]
	assert marks == [
		(at(2026, 12, 4, 8), ""),
		(at(2026, 12, 5, 8), "skipped"),
		(at(2026, 12, 6, 8), "excluded"),
		(at(2026, 12, 7, 8), ""),
	]


# -- properties against a brute-force reference -------------------------------------------------

ZONES = ("Europe/Paris", "America/New_York", "Australia/Lord_Howe", "America/Santiago", "Asia/Kolkata", "UTC")
EXPRESSIONS = ("0 9 * * *", "30 2 * * *", "*/20 * * * *", "0 0 * * 0", "15 1,3 * * 1-5", "0 */6 * * *")
SETTINGS = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def reference(
	expr: str, zone: str, excluded: set[date], move: bool, skipped: set[int], low: int, high: int
) -> list[int]:
	"""The slots in [low, high): every base slot from well before low, classified by its local date."""
	base = ScheduleSpec(name="ref", zone_name=zone, kind="cron", cron=expr)
	tz, clock = parse_zone(zone), clock_for(parse_zone(zone))
	out = set()
	slot = base.first(low - 40 * DAY)
	while slot is not None and slot < high:
		local = datetime.fromtimestamp(slot, tz)
		if local.date() not in excluded:
			out.add(slot)
		elif move:
			target = local.date()
			while target in excluded:
				target += timedelta(days=1)
			out.add(clock.instant(wall_seconds(datetime.combine(target, local.time().replace(tzinfo=None)))))
		slot = base.first(slot + 1)
	return sorted(s for s in out - skipped if low <= s < high)


@SETTINGS
@given(
	st.sampled_from(EXPRESSIONS),
	st.sampled_from(ZONES),
	st.booleans(),
	st.lists(st.integers(0, 40), max_size=15),
	st.lists(st.integers(0, 200), max_size=4),
	st.integers(0, 365),
)
def test_property_matches_the_reference(expr, zone, move, day_offsets, skip_picks, start_day):
	origin = date(2026, 1, 1) + timedelta(days=start_day)
	excluded = {origin + timedelta(days=d) for d in day_offsets}
	low = int(datetime.combine(origin, datetime.min.time(), ZoneInfo("UTC")).timestamp())
	high = low + 30 * DAY
	plain = reference(expr, zone, excluded, move, set(), low, high)
	skipped = {plain[i] for i in skip_picks if i < len(plain)}
	s = ScheduleSpec(
		name="p",
		zone_name=zone,
		kind="cron",
		cron=expr,
		calendar_policy="move" if move else "skip",
		excluded_dates=[d.isoformat() for d in excluded],
		skipped=sorted(skipped),
	)
	got, slot = [], s.first(low)
	while slot is not None and slot < high:
		got.append(slot)
		slot = s.first(slot + 1)
	assert got == reference(expr, zone, excluded, move, skipped, low, high)
