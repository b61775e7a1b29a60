"""Hypothesis properties over random valid expressions, zones and intervals."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from btu.shared.schedule import ScheduleSpec, parse_zone
from btu.shared.schedule.spec import STORED_DEFAULTS

pytestmark = pytest.mark.versions

ZONES = (
	"America/New_York",
	"Europe/London",
	"Europe/Dublin",
	"Australia/Sydney",
	"Australia/Lord_Howe",
	"Pacific/Chatham",
	"America/St_Johns",
	"America/Santiago",
	"America/Havana",
	"Asia/Kolkata",
	"UTC",
	"+05:30",
	"-08:00",
)
SETTINGS = settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@st.composite
def field(draw, low: int, high: int, star_ok: bool = True, value_high: int | None = None):
	"""(text, values, starts_with_star) for one cron field; explicit values stay <= value_high."""
	kind = draw(
		st.sampled_from(("star", "step", "one", "range", "list", "range_step") if star_ok else ("one", "range", "list"))
	)
	if kind == "star":
		return "*", set(range(low, high + 1)), True
	if kind == "step":
		step = draw(st.integers(1, max(1, (high - low) // 2)))
		return f"*/{step}", set(range(low, high + 1, step)), True
	high = value_high or high
	a = draw(st.integers(low, high))
	if kind == "one":
		return str(a), {a}, False
	b = draw(st.integers(a, high))
	if kind == "range":
		return f"{a}-{b}", set(range(a, b + 1)), False
	if kind == "range_step":
		step = draw(st.integers(1, 5))
		return f"{a}-{b}/{step}", set(range(a, b + 1, step)), False
	values = sorted(set(draw(st.lists(st.integers(low, high), min_size=1, max_size=4))))
	return ",".join(map(str, values)), set(values), False


@st.composite
def expressions(draw):
	seconds = draw(st.booleans())
	sec = draw(field(0, 59)) if seconds else ("0", {0}, False)
	minute = draw(field(0, 59))
	hour = draw(field(0, 23))
	dom = draw(field(1, 31, value_high=28))
	month = draw(field(1, 12))
	dow = draw(field(0, 6))
	parts = ([sec[0]] if seconds else []) + [minute[0], hour[0], dom[0], month[0], dow[0]]
	return " ".join(parts), sec[1], minute, hour, dom, month, dow


def matches(wall: datetime, sec, minute, hour, dom, month, dow) -> bool:
	day_of_dom = wall.day in dom[1]
	day_of_dow = (wall.weekday() + 1) % 7 in dow[1]
	either = not dom[2] and not dow[2]  # Vixie: both restricted -> either matches
	day = (day_of_dom or day_of_dow) if either else (day_of_dom and day_of_dow)
	return wall.second in sec and wall.minute in minute[1] and wall.hour in hour[1] and wall.month in month[1] and day


def offset(zone, instant: float) -> timedelta:
	return datetime.fromtimestamp(instant, zone).utcoffset()


instants = st.integers(int(datetime(2024, 1, 1).timestamp()), int(datetime(2028, 1, 1).timestamp()))


@SETTINGS
@given(expr=expressions(), zone_name=st.sampled_from(ZONES), start=instants)
def test_cron_fires_increase_and_match_local_time(expr, zone_name, start):
	text, sec, minute, hour, dom, month, dow = expr
	spec = ScheduleSpec(name="prop", zone_name=zone_name, kind="cron", cron=text)
	zone = parse_zone(zone_name)
	fires = spec.preview(25, datetime.fromtimestamp(start, timezone.utc))
	assert fires, text
	assert fires[0].timestamp() > start
	assert all(a < b for a, b in zip(fires, fires[1:]))
	real_time = minute[2] or hour[2]
	walls = []
	for fire in fires:
		wall = fire.astimezone(zone).replace(tzinfo=None)
		walls.append(wall)
		if matches(wall, sec, minute, hour, dom, month, dow):
			continue
		# Only a fixed-time expression may fire off-pattern: at the end of a gap that hid a match.
		assert not real_time, (text, zone_name, fire)
		t = fire.timestamp()
		before, after = offset(zone, t - 1), offset(zone, t)
		assert before < after, (text, zone_name, fire)
		hidden = wall - (after - before)
		assert any(
			matches(hidden + timedelta(seconds=s), sec, minute, hour, dom, month, dow)
			for s in range(int((after - before).total_seconds()))
		), (text, zone_name, fire)
	if not real_time:
		assert len(set(walls)) == len(walls), (text, zone_name)  # no local time fires twice


@SETTINGS
@given(expr=expressions(), zone_name=st.sampled_from(ZONES), start=instants)
def test_round_trip_and_fingerprint(expr, zone_name, start):
	spec = ScheduleSpec(name="rt", zone_name=zone_name, kind="cron", cron=expr[0], jitter_secs=start % 100)
	copy = ScheduleSpec.from_dict(spec.to_dict())
	assert copy == spec and copy.fingerprint == spec.fingerprint
	after = datetime.fromtimestamp(start, timezone.utc)
	assert copy.preview(5, after) == spec.preview(5, after)


@SETTINGS
@given(
	kind=st.sampled_from(["cron", "interval", "once"]),
	zone_name=st.sampled_from(ZONES),
	start=st.none() | instants,
	run_limit=st.sampled_from([0, 3]),
	jitter=st.sampled_from([0, 30]),
	catch_up=st.sampled_from(["fire_once", "skip", "fire_all"]),
	window=st.sampled_from([86400, 600]),
	overlap=st.sampled_from(["allow", "skip"]),
)
def test_the_stored_form_leaves_out_defaults_and_reads_back_alike(
	kind, zone_name, start, run_limit, jitter, catch_up, window, overlap
):
	what = {
		"cron": {"cron": "*/5 * * * *"},
		"interval": {"every": 90, "origin": 1_700_000_000},
		"once": {"at": 1_900_000_000},
	}[kind]
	spec = ScheduleSpec(
		name="st",
		zone_name=zone_name,
		kind=kind,
		start=start,
		run_limit=run_limit,
		jitter_secs=jitter,
		catch_up_policy=catch_up,
		catch_up_window=window,
		overlap_policy=overlap,
		**what,
	)
	stored = spec.stored()
	copy = ScheduleSpec.from_dict(stored)
	assert copy == spec and copy.fingerprint == spec.fingerprint
	assert not any(k in stored and stored[k] == v for k, v in STORED_DEFAULTS.items()), "a default is stored"
	assert None not in stored.values()


@SETTINGS
@given(
	origin=instants,
	every=st.integers(1, 10 * 86400),
	after=instants,
	zone_name=st.sampled_from(ZONES),
)
def test_intervals_keep_their_anchor(origin, every, after, zone_name):
	spec = ScheduleSpec(name="iv", zone_name=zone_name, kind="interval", every=every, origin=origin)
	fires = [int(f.timestamp()) for f in spec.preview(20, datetime.fromtimestamp(after, timezone.utc))]
	assert fires[0] > after and fires[0] >= origin
	assert fires[0] - every <= max(after, origin - every)
	assert all((f - origin) % every == 0 for f in fires)
	assert all(b - a == every for a, b in zip(fires, fires[1:]))


@SETTINGS
@given(
	expr=expressions(),
	zone_name=st.sampled_from(ZONES),
	start=instants,
	jitter=st.integers(1, 7200),
	name=st.text(max_size=12),
)
def test_jitter_is_deterministic_bounded_and_keeps_order(expr, zone_name, start, jitter, name):
	spec = ScheduleSpec(name=name, zone_name=zone_name, kind="cron", cron=expr[0], jitter_secs=jitter)
	twin = ScheduleSpec.from_dict(spec.to_dict())
	slot = spec.next_slot(datetime.fromtimestamp(start, timezone.utc))
	for _ in range(10):
		following = spec.next_slot(slot)
		fire = spec.fire_time(slot)
		assert fire == twin.fire_time(slot)
		assert slot <= fire <= slot + timedelta(seconds=jitter)
		assert fire < following
		slot = following
