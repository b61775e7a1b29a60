"""ScheduleSpec: what one BTU Task Schedule is, independent of storage.

Its fields, their checks and serialised form, and its slots: next_slot,
fire_time (with jitter), preview and describe. A row's columns become a
spec in row.py; plan() is the catch-up planner in catch_up.py.
"""

from __future__ import annotations

import hashlib
import inspect
import json
from collections.abc import Mapping
from datetime import date, datetime, timedelta
from typing import Any

from btu.shared.messages import _
from btu.shared.schedule import catch_up
from btu.shared.schedule.catch_up import MAX_CATCH_UP, FirePlan
from btu.shared.schedule.cron import CronExpression, compile_cron
from btu.shared.schedule.errors import ScheduleError, check_one_of
from btu.shared.schedule.row import spec_arguments
from btu.shared.schedule.rules import CronRule, ExcludingRule, IntervalRule, OnceRule, Rule
from btu.shared.schedule.zones import clock_for, parse_zone, posix_seconds, utc
from btu.shared.schedule.zones import zone_name as canonical_zone_name

KINDS = ("cron", "interval", "once")
CATCH_UP_POLICIES = ("fire_once", "skip", "fire_all")
OVERLAP_POLICIES = ("allow", "skip")
CALENDAR_POLICIES = ("skip", "move")
FORMAT_VERSION = 1
# Skipped slots a spec may hold: "skip next runs" asks for a few; past ones are pruned when the row is saved.
MAX_SKIPPED = 1000
# Excluded dates a spec may hold: the readers keep those of row.calendar_window (7 calendar years).
MAX_EXCLUDED_DATES = 7 * 366
_EPOCH_DAY = date(1970, 1, 1).toordinal()


class ScheduleSpec:
	"""Validated schedule semantics; see the package docstring for plan()."""

	__slots__ = (
		"name",
		"zone_name",
		"kind",
		"cron",
		"every",
		"origin",
		"at",
		"at_ms",
		"start",
		"end",
		"run_limit",
		"jitter_secs",
		"catch_up_policy",
		"catch_up_window",
		"catch_up_max",
		"overlap_policy",
		"skipped",
		"calendar_policy",
		"excluded_dates",
		"zone",
		"rule",
		"_expr",
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
		at_ms: int = 0,
		start: int | None = None,
		end: int | None = None,
		run_limit: int = 0,
		jitter_secs: int = 0,
		catch_up_policy: str = "fire_once",
		catch_up_window: int = 86400,
		catch_up_max: int = 10,
		overlap_policy: str = "allow",
		skipped: tuple[int, ...] | list[int] = (),
		calendar_policy: str = "skip",
		excluded_dates: tuple[str, ...] | list[str] = (),
	) -> None:
		_check_choices(kind, calendar_policy, catch_up_policy, overlap_policy, catch_up_max, at_ms)
		if start is not None and end is not None and end < start:
			raise ScheduleError("end_time", utc(end).isoformat(), _("is before start_time; move it later or clear it"))
		self.name = name
		self.zone = parse_zone(zone_name)
		self.zone_name = canonical_zone_name(self.zone)
		self.kind = kind
		self.cron = cron
		self.every = every
		self.origin = origin
		self.at = at
		self.at_ms = at_ms
		self.start = start
		self.end = end
		self.run_limit = run_limit
		self.jitter_secs = jitter_secs
		self.catch_up_policy = catch_up_policy
		self.catch_up_window = timedelta(seconds=catch_up_window)
		self.catch_up_max = catch_up_max
		self.overlap_policy = overlap_policy
		self.skipped = _skipped(skipped)
		self.calendar_policy = calendar_policy
		self.excluded_dates = _excluded_dates(excluded_dates)
		self._expr: CronExpression | None = None
		self.rule = self._make_rule()

	def _make_rule(self) -> Rule:
		"""The rule of the schedule's kind, its exclusions applied when it has any."""
		rule: Rule
		if self.kind == "cron":
			self._expr = compile_cron(self.cron or "")
			rule = CronRule(self._expr, clock_for(self.zone))
		elif self.kind == "interval":
			if not self.every or self.every < 1 or self.origin is None:
				raise ScheduleError(
					"every", self.every, _("an interval needs every >= 1 and an anchor (start_time or creation)")
				)
			rule = IntervalRule(self.origin, self.every)
		else:
			if self.at is None:
				raise ScheduleError("run_at", self.at, _("is required for a Once schedule"))
			rule = OnceRule(self.at)
		if self.skipped or self.excluded_dates:
			days = frozenset(date.fromisoformat(text).toordinal() - _EPOCH_DAY for text in self.excluded_dates)
			rule = ExcludingRule(
				rule, clock_for(self.zone), frozenset(self.skipped), days, self.calendar_policy == "move"
			)
		return rule

	# -- construction ---------------------------------------------------------

	@classmethod
	def from_row(cls, row: Mapping[str, Any], *, system_time_zone: str | None) -> ScheduleSpec:
		"""A spec from BTU Task Schedule columns (missing/None/"" = DocType default); see row.spec_arguments."""
		return cls(**spec_arguments(row, system_time_zone=system_time_zone))

	def to_dict(self) -> dict[str, Any]:
		"""The spec as JSON-ready data, as Redis stores it; from_dict() reads it back."""
		d = {
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
		# Only when set, so that a spec without them keeps the fingerprint it had before they existed.
		if self.at_ms:
			d["at_ms"] = self.at_ms
		if self.skipped:
			d["skip"] = list(self.skipped)
		if self.excluded_dates:
			d["calendar"] = {"policy": self.calendar_policy, "dates": list(self.excluded_dates)}
		return d

	def stored(self) -> dict[str, Any]:
		"""to_dict() less the values that are the constructor's defaults, as the scheduler's state keeps it: most of a
		spec's fields are unset, and a million schedules pay each field's bytes once each."""
		return {k: v for k, v in self.to_dict().items() if k not in STORED_DEFAULTS or v != STORED_DEFAULTS[k]}

	@classmethod
	def from_dict(cls, d: Mapping[str, Any]) -> ScheduleSpec:
		"""The spec to_dict() or stored() gave (ScheduleError for another format version)."""
		if d.get("v") != FORMAT_VERSION:
			raise ScheduleError(
				"v", d.get("v"), _("unknown spec format; this code reads version {version}"), version=FORMAT_VERSION
			)
		args = {k: v for k, v in d.items() if k != "v"}
		args["zone_name"] = args.pop("zone")
		if "skip" in args:
			args["skipped"] = args.pop("skip")
		if "calendar" in args:
			calendar = args.pop("calendar")
			if not isinstance(calendar, Mapping):
				raise ScheduleError("calendar", calendar, _("is not an object of policy and dates"))
			args["calendar_policy"], args["excluded_dates"] = calendar.get("policy"), calendar.get("dates") or ()
		return cls(**args)

	@property
	def fingerprint(self) -> str:
		"""32 hex digits that change when any field of to_dict() does."""
		text = json.dumps(self.to_dict(), sort_keys=True, separators=(",", ":"))
		return hashlib.sha256(text.encode()).hexdigest()[:32]

	def __eq__(self, other: object) -> bool:
		return isinstance(other, ScheduleSpec) and self.to_dict() == other.to_dict()

	def __hash__(self) -> int:
		return hash(self.fingerprint)

	def __repr__(self) -> str:
		what = {"cron": self.cron, "interval": f"every {self.every}s", "once": self.at}[self.kind]
		return f"<ScheduleSpec {self.name} {self.kind} {what!r} {self.zone_name}>"

	# -- slots ------------------------------------------------------------------

	def first(self, t: int) -> int | None:
		"""The first slot at or after instant t, within start and end, or None."""
		if self.start is not None and t < self.start:
			t = self.start
		slot = self.rule.first(t)
		if slot is None or (self.end is not None and slot > self.end):
			return None
		return slot

	def jitter_of(self, slot: int) -> int:
		"""The seconds `slot` fires late: from a hash of (name, slot), less than the gap to the next slot."""
		if not self.jitter_secs:
			return 0
		following = self.rule.first(slot + 1)
		bound = self.jitter_secs if following is None else min(self.jitter_secs, following - slot - 1)
		if bound <= 0:
			return 0
		digest = hashlib.blake2b(f"{self.name}\x00{slot}".encode(), digest_size=8).digest()
		return int.from_bytes(digest, "big") % (bound + 1)

	def next_slot(self, after: datetime) -> datetime | None:
		"""The first nominal slot strictly after `after`, as aware UTC, or None."""
		slot = self.first(posix_seconds(after, "after") + 1)
		return None if slot is None else utc(slot)

	def fire_time(self, slot: datetime) -> datetime:
		"""`slot` plus its deterministic jitter (always less than the gap to the next slot), and a Once slot's
		milliseconds: slots are whole seconds, so a Once run_at of 09:00:00.250 is the slot 09:00:00 fired 250 ms into
		it."""
		instant = posix_seconds(slot, "slot")
		moment = utc(instant + self.jitter_of(instant))
		if self.at_ms and instant == self.at:
			moment += timedelta(milliseconds=self.at_ms)
		return moment

	def preview(self, n: int, after: datetime) -> list[datetime]:
		"""The next n fire instants (UTC, jitter applied) of slots after `after`."""
		out: list[datetime] = []
		slot = self.first(posix_seconds(after, "after") + 1)
		while slot is not None and len(out) < n:
			out.append(utc(slot + self.jitter_of(slot)))
			slot = self.first(slot + 1)
		return out

	def preview_marked(self, n: int, after: datetime) -> list[dict[str, Any]]:
		"""The next n fires after `after` and, among them, the slots exclusions removed (at most n of those).

		Each entry: "at" (UTC; a fire's jitter applied), "mark" ("" a fire, "moved" a fire moved off an
		excluded day, "skipped" a slot skipped on request, "excluded" a slot on an excluded day, dropped or moved by the
		policy) and "moved_from" (the local date a moved fire came from, else None).
		"""
		t = posix_seconds(after, "after") + 1
		slots: list[int] = []
		slot = self.first(t)
		while slot is not None and len(slots) < n:
			slots.append(slot)
			slot = self.first(slot + 1)
		rule = self.rule
		if not isinstance(rule, ExcludingRule):
			return [{"at": utc(s + self.jitter_of(s)), "mark": "", "moved_from": None} for s in slots]
		entries = []
		for s in slots:
			source = rule.moved_from(s)
			entries.append(
				{
					"at": utc(s + self.jitter_of(s)),
					"mark": "moved" if source is not None else "",
					"moved_from": None if source is None else date.fromordinal(source + _EPOCH_DAY),
				}
			)
		# Removed slots up to the last fire shown (or the end), found within a walk of bounded length.
		stop = slots[-1] if len(slots) == n else self.end
		low = t if self.start is None else max(t, self.start)
		removed: list[tuple[int, str]] = []
		for mark, step in (("skipped", rule.calendar_first), ("excluded", rule.base.first)):
			slot, walked = step(low), 0
			while slot is not None and (stop is None or slot <= stop) and len(removed) < n and walked < 100 * n:
				walked += 1
				if mark == "skipped" and slot in rule.skipped:
					removed.append((slot, mark))
				elif mark == "excluded" and rule.day_of(slot) in rule.excluded:
					removed.append((slot, mark))
				slot = step(slot + 1)
		entries += [{"at": utc(s), "mark": mark, "moved_from": None} for s, mark in removed[:n]]
		return sorted(entries, key=lambda entry: entry["at"])

	def describe(self) -> str:
		"""Readable English with the zone, e.g. "At 09:00 AM, Monday through Friday (America/New_York)"."""
		if self.kind == "cron":
			text = _cron_description(self._expr)
		elif self.kind == "interval":
			text = f"Every {_duration(self.every)}, from {self._local(self.origin)}"
		else:
			text = f"Once, at {self._local(self.at)}" + (f".{self.at_ms:03d}" if self.at_ms else "")
		return f"{text} ({self.zone_name})"

	def _local(self, instant: int) -> str:
		return datetime.fromtimestamp(instant, self.zone).strftime("%Y-%m-%d %H:%M:%S")

	# -- plan --------------------------------------------------------------------

	def plan(
		self,
		cursor: datetime,
		now: datetime,
		*,
		runs: int = 0,
		grace: timedelta = timedelta(seconds=10),
		ahead: timedelta = timedelta(0),
	) -> FirePlan:
		"""Which slots to fire at `now`, due if their fire time is at most `ahead` away; see the package docstring."""
		return catch_up.plan(self, cursor, now, runs, grace, ahead)


# The constructor's defaults, by their names in to_dict() (the fields stored() leaves out when they hold them).
STORED_DEFAULTS = {
	name: parameter.default
	for name, parameter in inspect.signature(ScheduleSpec.__init__).parameters.items()
	if parameter.default is not inspect.Parameter.empty
}


def _check_choices(
	kind: str, calendar_policy: str, catch_up_policy: str, overlap_policy: str, catch_up_max: int, at_ms: int
) -> None:
	"""A spec's kind and policies are among their choices, catch_up_max and a Once run's milliseconds in their range."""
	check_one_of("kind", kind, KINDS)
	check_one_of("calendar_policy", calendar_policy, CALENDAR_POLICIES)
	check_one_of("catch_up_policy", catch_up_policy, CATCH_UP_POLICIES)
	check_one_of("overlap_policy", overlap_policy, OVERLAP_POLICIES)
	if not 0 <= catch_up_max <= MAX_CATCH_UP:
		raise ScheduleError(
			"catch_up_max",
			catch_up_max,
			_("must be from 0 to {limit}, the most fires one catch-up may make; lower it, or use fire_once"),
			limit=MAX_CATCH_UP,
		)
	if isinstance(at_ms, bool) or not isinstance(at_ms, int) or not 0 <= at_ms <= 999 or (at_ms and kind != "once"):
		raise ScheduleError(
			"run_at",
			at_ms,
			_("milliseconds must be a whole number from 0 to 999, and only a Once schedule has them"),
		)


def _skipped(values) -> tuple[int, ...]:
	"""Skipped slot instants, sorted and unique (ScheduleError for too many or one not a whole second)."""
	if isinstance(values, (str, bytes)) or not hasattr(values, "__iter__"):
		raise ScheduleError("skipped_slots", values, _("is not a list of slot instants"))
	out = set()
	for value in values:
		if isinstance(value, bool) or not isinstance(value, int):
			raise ScheduleError("skipped_slots", value, _("is not a slot instant (whole seconds since the epoch)"))
		out.add(value)
	if len(out) > MAX_SKIPPED:
		raise ScheduleError(
			"skipped_slots",
			len(out),
			_("slots are skipped, more than {limit}; unskip some, or pause or disable the schedule"),
			limit=MAX_SKIPPED,
		)
	return tuple(sorted(out))


def _excluded_dates(values) -> tuple[str, ...]:
	"""Excluded dates as sorted unique YYYY-MM-DD texts (ScheduleError for too many or one not a date)."""
	if isinstance(values, (str, bytes)) or not hasattr(values, "__iter__"):
		raise ScheduleError("excluded_dates", values, _("is not a list of dates"))
	out = set()
	for value in values:
		if isinstance(value, datetime) or not isinstance(value, (str, date)):
			raise ScheduleError("excluded_dates", value, _("is not a date; use YYYY-MM-DD"))
		try:
			out.add((value if isinstance(value, date) else date.fromisoformat(value)).isoformat())
		except ValueError:
			raise ScheduleError("excluded_dates", value, _("is not a date; use YYYY-MM-DD")) from None
	if len(out) > MAX_EXCLUDED_DATES:
		raise ScheduleError(
			"excluded_dates",
			len(out),
			_("dates are excluded, more than {limit} (7 years of days)"),
			limit=MAX_EXCLUDED_DATES,
		)
	return tuple(sorted(out))


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
