"""ScheduleSpec: one BTU Task Schedule's semantics, independent of storage."""

from __future__ import annotations

import hashlib
import json
import math
from collections import deque
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone
from typing import Any, Mapping

from btu.shared.schedule.cron import CronExpression, compile_cron
from btu.shared.schedule.errors import ScheduleError
from btu.shared.schedule.frequency import HELPERS, frequency_to_cron, whole_number
from btu.shared.schedule.rules import CronRule, IntervalRule, OnceRule
from btu.shared.schedule.zones import ZoneClock, clock_for, parse_zone, wall_seconds
from btu.shared.schedule.zones import zone_name as canonical_zone_name

# What Frappe v15 uses when System Settings has no time_zone.
FRAPPE_DEFAULT_ZONE = "Asia/Kolkata"
KINDS = ("cron", "interval", "once")
CATCH_UP_POLICIES = ("fire_once", "skip", "fire_all")
OVERLAP_POLICIES = ("allow", "skip")
UNITS = {"Seconds": 1, "Minutes": 60, "Hours": 3600, "Days": 86400}
MAX_INTERVAL = 100 * 366 * 86400  # seconds; beyond it slots leave datetime's range (year 9999)
FREQUENCIES = HELPERS + ("Cron Style", "Interval", "Once")
# plan() enumerates at most this many cron slots to count a backlog.
COUNT_BUDGET = 10_000
# The most fires one catch-up may make (fire_all), and the most fires one plan() returns: a longer
# catch-up goes out over several steps, so one step never builds more jobs than this.
MAX_CATCH_UP = 10_000
MAX_FIRES_PER_PLAN = 1_000
FORMAT_VERSION = 1


@dataclass
class FirePlan:
	"""What to do at `now` for a schedule whose pending slot is `cursor`."""

	fire: list[datetime]
	skipped: int
	expired: int
	next_cursor: datetime | None
	finished: bool
	count_truncated: bool = False


def _utc(instant: int) -> datetime:
	return datetime.fromtimestamp(instant, timezone.utc)


def _instant(value: datetime, what: str = "after") -> int:
	if value.tzinfo is None:
		raise ScheduleError(what, value, "must be an aware datetime (with a time zone)")
	return math.floor(value.timestamp())


class ScheduleSpec:
	"""Validated schedule semantics; see the package docstring for plan()."""

	__slots__ = (
		"name", "zone_name", "kind", "cron", "every", "origin", "at", "start", "end",
		"run_limit", "jitter_secs", "catch_up_policy", "catch_up_window", "catch_up_max",
		"overlap_policy", "zone", "_clock", "_rule", "_expr",
	)

	def __init__(
		self,
		*,
		name: str,
		zone_name: str,
		kind: str,
		cron: str | None = None,
		every: int | None = None,
		origin: int | None = None,
		at: int | None = None,
		start: int | None = None,
		end: int | None = None,
		run_limit: int = 0,
		jitter_secs: int = 0,
		catch_up_policy: str = "fire_once",
		catch_up_window: int = 86400,
		catch_up_max: int = 10,
		overlap_policy: str = "allow",
	) -> None:
		if kind not in KINDS:
			raise ScheduleError("kind", kind, f"must be one of {', '.join(KINDS)}")
		if catch_up_policy not in CATCH_UP_POLICIES:
			raise ScheduleError("catch_up_policy", catch_up_policy, f"must be one of {', '.join(CATCH_UP_POLICIES)}")
		if overlap_policy not in OVERLAP_POLICIES:
			raise ScheduleError("overlap_policy", overlap_policy, f"must be one of {', '.join(OVERLAP_POLICIES)}")
		if not 0 <= catch_up_max <= MAX_CATCH_UP:
			raise ScheduleError(
				"catch_up_max", catch_up_max,
				f"must be from 0 to {MAX_CATCH_UP}, the most fires one catch-up may make; lower it, or use fire_once",
			)
		if start is not None and end is not None and end < start:
			raise ScheduleError("end_time", _utc(end).isoformat(), "is before start_time; move it later or clear it")
		self.name = name
		self.zone = parse_zone(zone_name)
		self.zone_name = canonical_zone_name(self.zone)
		self.kind = kind
		self.cron = cron
		self.every = every
		self.origin = origin
		self.at = at
		self.start = start
		self.end = end
		self.run_limit = run_limit
		self.jitter_secs = jitter_secs
		self.catch_up_policy = catch_up_policy
		self.catch_up_window = timedelta(seconds=catch_up_window)
		self.catch_up_max = catch_up_max
		self.overlap_policy = overlap_policy
		self._clock: ZoneClock = clock_for(self.zone)
		self._expr: CronExpression | None = None
		if kind == "cron":
			self._expr = compile_cron(cron or "")
			self._rule = CronRule(self._expr, self._clock)
		elif kind == "interval":
			if not every or every < 1 or origin is None:
				raise ScheduleError("every", every, "an interval needs every >= 1 and an anchor (start_time or creation)")
			self._rule = IntervalRule(origin, every)
		else:
			if at is None:
				raise ScheduleError("run_at", at, "is required for a Once schedule")
			self._rule = OnceRule(at)

	# -- construction ---------------------------------------------------------

	@classmethod
	def from_row(cls, row: Mapping[str, Any], *, system_time_zone: str | None) -> ScheduleSpec:
		"""A spec from BTU Task Schedule columns (missing/None/"" = DocType default)."""

		def get(key: str, default: Any = None) -> Any:
			value = row.get(key)
			return default if value is None or value == "" else value

		system_zone = (system_time_zone or "").strip() or FRAPPE_DEFAULT_ZONE
		if get("time_zone") is None and system_time_zone:
			try:
				parse_zone(system_zone)
			except ScheduleError:
				raise ScheduleError(
					"time_zone", "", f"is empty and the site's System Settings time_zone {system_zone!r} is not a known zone; "
					"set this schedule's time_zone or fix System Settings"
				) from None
		zone = parse_zone(get("time_zone"), system_zone)
		clock = clock_for(zone)
		frequency = get("run_frequency")
		if frequency is None:
			# Not the form's default Daily: a row that lost its frequency must not start firing at 00:00.
			raise ScheduleError("run_frequency", "", f"is empty; set it to one of {', '.join(FREQUENCIES)}")
		if frequency not in FREQUENCIES:
			raise ScheduleError("run_frequency", frequency, f"must be one of {', '.join(FREQUENCIES)}")
		start = _row_instant("start_time", get("start_time"), clock)
		end = _row_instant("end_time", get("end_time"), clock)
		fields: dict[str, Any] = {}
		if frequency in HELPERS:
			fields.update(kind="cron", cron=frequency_to_cron(
				frequency, get("minute", 0), get("hour", 0), get("day_of_week", "Monday"),
				get("day_of_month", 1), get("month", "January"),
			))
		elif frequency == "Cron Style":
			text = get("cron_string")
			if not text:
				raise ScheduleError("cron_string", "", "is required for Cron Style; e.g. 0 9 * * 1-5")
			fields.update(kind="cron", cron=" ".join(str(text).split()))
		elif frequency == "Interval":
			every = whole_number("every", get("every"), 0, 1)
			if every == 0:
				raise ScheduleError("every", get("every"), "is required for Interval; give a whole number of 1 or more")
			unit = get("every_unit", "Minutes")
			if unit not in UNITS:
				raise ScheduleError("every_unit", unit, f"must be one of {', '.join(UNITS)}")
			if every * UNITS[unit] > MAX_INTERVAL:
				raise ScheduleError("every", every, f"{unit} is more than 100 years; use a Yearly or Once schedule")
			if start is not None:
				origin = start
			else:
				created = _row_instant("creation", get("creation"), clock_for(parse_zone(system_zone)))
				if created is None:
					raise ScheduleError("start_time", "", "an Interval schedule needs a start_time (or a saved creation time) to anchor on")
				origin = created + every * UNITS[unit]
			fields.update(kind="interval", every=every * UNITS[unit], origin=origin)
		else:
			at = _row_instant("run_at", get("run_at"), clock)
			if at is None:
				raise ScheduleError("run_at", "", "is required for a Once schedule; give the date and time to run")
			fields.update(kind="once", at=at)
		return cls(
			name=str(get("name", "")),
			zone_name=canonical_zone_name(zone),
			start=start,
			end=end,
			run_limit=whole_number("run_limit", get("run_limit"), 0, 0),
			jitter_secs=whole_number("jitter_secs", get("jitter_secs"), 0, 0),
			catch_up_policy=get("catch_up_policy", "fire_once"),
			catch_up_window=whole_number("catch_up_window", get("catch_up_window"), 86400, 0),
			catch_up_max=whole_number("catch_up_max", get("catch_up_max"), 10, 0),
			overlap_policy=get("overlap_policy", "allow"),
			**fields,
		)

	def to_dict(self) -> dict[str, Any]:
		return {
			"v": FORMAT_VERSION,
			"name": self.name,
			"zone": self.zone_name,
			"kind": self.kind,
			"cron": self.cron,
			"every": self.every,
			"origin": self.origin,
			"at": self.at,
			"start": self.start,
			"end": self.end,
			"run_limit": self.run_limit,
			"jitter_secs": self.jitter_secs,
			"catch_up_policy": self.catch_up_policy,
			"catch_up_window": int(self.catch_up_window.total_seconds()),
			"catch_up_max": self.catch_up_max,
			"overlap_policy": self.overlap_policy,
		}

	@classmethod
	def from_dict(cls, d: Mapping[str, Any]) -> ScheduleSpec:
		if d.get("v") != FORMAT_VERSION:
			raise ScheduleError("v", d.get("v"), f"unknown spec format; this code reads version {FORMAT_VERSION}")
		args = {k: v for k, v in d.items() if k != "v"}
		args["zone_name"] = args.pop("zone")
		return cls(**args)

	@property
	def fingerprint(self) -> str:
		text = json.dumps(self.to_dict(), sort_keys=True, separators=(",", ":"))
		return hashlib.sha256(text.encode()).hexdigest()[:32]

	@property
	def jitter(self) -> timedelta:
		return timedelta(seconds=self.jitter_secs)

	def __eq__(self, other: object) -> bool:
		return isinstance(other, ScheduleSpec) and self.to_dict() == other.to_dict()

	def __hash__(self) -> int:
		return hash(self.fingerprint)

	def __repr__(self) -> str:
		what = {"cron": self.cron, "interval": f"every {self.every}s", "once": self.at}[self.kind]
		return f"<ScheduleSpec {self.name} {self.kind} {what!r} {self.zone_name}>"

	# -- slots ------------------------------------------------------------------

	def _first(self, t: int) -> int | None:
		"""The first slot at or after instant t, within start and end."""
		if self.start is not None and t < self.start:
			t = self.start
		slot = self._rule.first(t)
		if slot is None or (self.end is not None and slot > self.end):
			return None
		return slot

	def _jitter_of(self, slot: int) -> int:
		if not self.jitter_secs:
			return 0
		following = self._rule.first(slot + 1)
		bound = self.jitter_secs if following is None else min(self.jitter_secs, following - slot - 1)
		if bound <= 0:
			return 0
		digest = hashlib.blake2b(f"{self.name}\x00{slot}".encode(), digest_size=8).digest()
		return int.from_bytes(digest, "big") % (bound + 1)

	def next_slot(self, after: datetime) -> datetime | None:
		"""The first nominal slot strictly after `after`, as aware UTC, or None."""
		slot = self._first(_instant(after) + 1)
		return None if slot is None else _utc(slot)

	def fire_time(self, slot: datetime) -> datetime:
		"""`slot` plus its deterministic jitter (always less than the gap to the next slot)."""
		instant = _instant(slot, "slot")
		return _utc(instant + self._jitter_of(instant))

	def preview(self, n: int, after: datetime) -> list[datetime]:
		"""The next n fire instants (UTC, jitter applied) of slots after `after`."""
		out: list[datetime] = []
		slot = self._first(_instant(after) + 1)
		while slot is not None and len(out) < n:
			out.append(_utc(slot + self._jitter_of(slot)))
			slot = self._first(slot + 1)
		return out

	def describe(self) -> str:
		"""Readable English with the zone, e.g. "At 09:00 AM, Monday through Friday (America/New_York)"."""
		if self.kind == "cron":
			text = _cron_description(self._expr)
		elif self.kind == "interval":
			text = f"Every {_duration(self.every)}, from {self._local(self.origin)}"
		else:
			text = f"Once, at {self._local(self.at)}"
		return f"{text} ({self.zone_name})"

	def _local(self, instant: int) -> str:
		return datetime.fromtimestamp(instant, self.zone).strftime("%Y-%m-%d %H:%M:%S")

	# -- plan --------------------------------------------------------------------

	def plan(
		self, cursor: datetime, now: datetime, *, runs: int = 0, grace: timedelta = timedelta(seconds=10), ahead: timedelta = timedelta(0),
	) -> FirePlan:
		"""Which slots to fire at `now`, counting as due those whose fire time is at most `ahead` away; see the package docstring."""
		remaining = self.run_limit - runs if self.run_limit else None
		if remaining is not None and remaining <= 0:
			return FirePlan([], 0, 0, None, True)
		moment = now.timestamp()
		due_by = math.floor(moment + ahead.total_seconds())  # due: fire_time <= now + ahead
		on_time_from = math.ceil(moment - grace.total_seconds())  # on time: fire_time >= this
		expired_before = math.ceil(moment - self.catch_up_window.total_seconds())  # expired: slot < this
		keep = {"skip": 0, "fire_once": 1, "fire_all": self.catch_up_max}[self.catch_up_policy]
		budget = [COUNT_BUDGET]
		truncated = False

		slot = self._first(math.ceil(cursor.timestamp()))
		# Slots before this are missed whatever their jitter: fire_time <= slot + jitter_secs.
		surely_missed = on_time_from - self.jitter_secs
		expired = 0
		if slot is not None and slot < min(expired_before, surely_missed):
			boundary = min(expired_before, surely_missed)
			expired, cut = self._count(slot, boundary, budget)
			truncated |= cut
			slot = self._first(boundary)
		missed = 0
		tail: deque[int] = deque(maxlen=keep) if keep else deque(maxlen=0)
		if slot is not None and slot < surely_missed:
			missed, last, cut = self._tail(slot, surely_missed, keep, budget)
			truncated |= cut
			tail.extend(last)
			slot = self._first(surely_missed)
		on_time: list[int] = []
		while slot is not None:
			fire_at = slot + self._jitter_of(slot)
			if fire_at > due_by:
				break
			if fire_at >= on_time_from:
				on_time.append(slot)
			elif slot < expired_before:
				expired += 1
			else:
				missed += 1
				if keep:
					tail.append(slot)
			slot = self._first(slot + 1)

		fire = list(tail) + on_time
		skipped = missed - len(tail)
		finished = slot is None
		if remaining is not None and len(fire) >= remaining:
			fire = fire[:remaining]
			finished = True
		if len(fire) > MAX_FIRES_PER_PLAN:
			# The rest of a long catch-up is due at once: the next plan, from this cursor, fires it.
			slot, finished = fire[MAX_FIRES_PER_PLAN], False
			fire = fire[:MAX_FIRES_PER_PLAN]
		return FirePlan(
			fire=[_utc(s) for s in fire],
			skipped=skipped,
			expired=expired,
			next_cursor=None if finished else _utc(slot),
			finished=finished,
			count_truncated=truncated,
		)

	def _count(self, low: int, high: int, budget: list[int]) -> tuple[int, bool]:
		"""Slots in [low, high) (low is a slot); cron counts stop at the budget."""
		if isinstance(self._rule, IntervalRule):
			return self._rule.count(low, self._bounded(high)), False
		count, slot = 0, low
		while slot is not None and slot < high:
			if budget[0] <= 0:
				return count, True
			budget[0] -= 1
			count += 1
			slot = self._first(slot + 1)
		return count, False

	def _tail(self, low: int, high: int, keep: int, budget: list[int]) -> tuple[int, list[int], bool]:
		"""How many slots lie in [low, high) (low is a slot), and the last `keep` of them."""
		if isinstance(self._rule, IntervalRule):
			count = self._rule.count(low, self._bounded(high))
			every = self._rule.every
			last = low + (count - 1) * every
			return count, [last - i * every for i in range(min(keep, count) - 1, -1, -1)], False
		count, slot = 0, low
		last: deque[int] = deque(maxlen=keep)
		while slot is not None and slot < high:
			if budget[0] <= 0:
				break
			budget[0] -= 1
			count += 1
			last.append(slot)
			slot = self._first(slot + 1)
		else:
			return count, list(last), False
		# Too many to count: look back from `high` in growing spans for the last `keep`.
		span = 60
		while True:
			begin = max(low, high - span)
			found: list[int] = []
			slot = self._first(begin)
			while slot is not None and slot < high:
				found.append(slot)
				slot = self._first(slot + 1)
			if len(found) >= keep or begin == low:
				return max(count, len(found)), found[len(found) - keep:] if keep else [], True
			span *= 8

	def _bounded(self, high: int) -> int:
		"""`high` clipped to just past the end bound."""
		return high if self.end is None else min(high, self.end + 1)


def _row_instant(field_name: str, value: Any, clock: ZoneClock) -> int | None:
	"""A Datetime column (naive in `clock`'s zone, or aware, or text) as an instant."""
	if value is None or value == "":
		return None
	if isinstance(value, str):
		try:
			value = datetime.fromisoformat(value.strip().replace("Z", "+00:00"))
		except ValueError:
			raise ScheduleError(field_name, value, "is not a date and time; use YYYY-MM-DD HH:MM:SS") from None
	if not isinstance(value, datetime):
		raise ScheduleError(field_name, value, "is not a date and time; use YYYY-MM-DD HH:MM:SS")
	if value.tzinfo is not None:
		return math.floor(value.timestamp())
	return clock.instant(wall_seconds(value))


def _duration(seconds: int) -> str:
	for unit, size in (("day", 86400), ("hour", 3600), ("minute", 60)):
		if seconds % size == 0:
			count = seconds // size
			return f"{count} {unit}" + ("s" if count != 1 else "") if count != 1 else unit
	return f"{seconds} seconds" if seconds != 1 else "second"


_DESCRIPTIONS: dict[str, str] = {}


def _cron_description(expr: CronExpression) -> str:
	text = _DESCRIPTIONS.get(expr.canonical)
	if text is None:
		from cron_descriptor import Options, get_description

		options = Options()
		options.throw_exception_on_parse_error = True
		# Fixed, not the process locale's: cron-descriptor 2 guesses both from locale.getlocale(),
		# which is en_US under C.UTF-8 on Python 3.11 and C on 3.13+ ("09:00 AM" against "09:00").
		options.locale_code = "en_US"
		options.use_24hour_time_format = False
		try:
			text = get_description(expr.canonical, options)
		except Exception:
			text = f"Cron {expr.canonical}"
		_DESCRIPTIONS[expr.canonical] = text
	return text
