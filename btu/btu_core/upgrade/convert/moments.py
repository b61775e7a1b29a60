"""Which upgraded schedules now fire at other moments than the original BTU fired them, before and after.

The original fired what its daemon read in the stored `cron_string`, not what the form's fields said:
- before v15.2 (`local_schema` False) the Rust daemon computed the next match as if the cron were UTC and, when
  its hour field is not `*`, read that wall clock again in BTU Configuration's `cron_time_zone` (so a helper,
  already converted to UTC at save, was shifted twice unless that zone was UTC). Its cron crate counted weekdays
  1-7 from Sunday and needed both day fields to match; btu_scheduler_py, run on the same rows, used croniter
  (0-6 from Sunday, either day field). A cron naming weekdays fired on other days under each, so both readings
  are compared. The daemon panicked on a local time that did not exist or came twice: no fire there.
- from v15.2 btu_scheduler_py read the cron as local time in the schedule's `cron_timezone`, else
  `cron_time_zone`, as BTU reads a cron.
BTU fires a converted row as its spec says (a helper at its fields' local time). The two are compared over the
coming year (a sample a month apart, so a DST change shows), and a change is listed with a Cron Style cron and
zone that gives the original's moments back where one does.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone
from enum import Enum
from typing import Any

from btu.shared.schedule import ScheduleError, ScheduleSpec
from btu.shared.schedule.cron import DAYS, CronExpression
from btu.shared.schedule.row import SPEC_FIELDS
from btu.shared.schedule.zones import parse_zone, posix_seconds, utc, zone_name

UTC = "UTC"
# The upgrade note's field: what it lists is the row's fire moments, not one column.
FIELD = "next fires"
# How far ahead moments are compared, and how often they are sampled: a month apart sees each DST change.
HORIZON = timedelta(days=366)
SAMPLE_EVERY = timedelta(days=30)
PER_SAMPLE = 2
SHOWN = 3
# A cron the daemon could match no later than this never fired (Feb 29 fits).
SEARCH_DAYS = 4 * 366


class Reading(Enum):
	"""How an original daemon read a cron's day fields."""

	RUST = "the Rust daemon (weekdays 1-7 from Sunday, both day fields)"
	CRONITER = "btu_scheduler_py (weekdays 0-6 from Sunday, either day field)"


@dataclass(frozen=True)
class OriginalCron:
	"""The stored cron as one original daemon read it: the expression in BTU's dialect and the zone of its wall
	clock (None: read as UTC and used as is). `days_both`: day-of-month and day-of-week must both match."""

	expression: CronExpression
	zone: str | None
	days_both: bool

	def moments(self, after: datetime) -> Iterator[datetime]:
		"""Its fire moments after `after`, in order (none where the daemon panicked)."""
		zone = parse_zone(self.zone) if self.zone else timezone.utc
		# A wall clock ahead of UTC reads a match up to a day earlier as a moment after `after`.
		wall = posix_seconds(after, "after") - 86400
		limit = wall + SEARCH_DAYS * 86400
		while (wall := self.expression.next_match(wall + 1, limit)) is not None:
			naive = utc(wall).replace(tzinfo=None)
			if self.days_both and not (
				naive.day in self.expression.doms and naive.isoweekday() % 7 in self.expression.dows
			):
				continue
			moment = _local(naive, zone)
			if moment is not None and moment > after:
				yield moment

	def back_in_btu(self) -> tuple[str, str] | None:
		"""A Cron Style cron and zone BTU fires at these same moments (its day fields either-or), or None."""
		if self.days_both:
			return None
		return self.expression.canonical, self.zone or UTC


@dataclass(frozen=True)
class MomentChange:
	"""The next moments from `since`, as the original fired them (per reading) and as BTU fires them."""

	since: datetime
	before: dict[Reading, tuple[datetime, ...]]
	after: tuple[datetime, ...]
	zone: str
	keep: tuple[str, str] | None


def original_crons(
	cron: Any, *, local_schema: bool, zone: str, config_zone: str | None
) -> dict[Reading, OriginalCron | None]:
	"""How each daemon read `cron` (None: it fired nothing). `zone`: the v15.2 schedule's zone."""
	fields = str(cron or "").split()
	try:
		config_zone = zone_name(parse_zone(config_zone, UTC))
	except ScheduleError:
		config_zone = UTC  # the upgrade gave the schedule UTC and listed the zone
	if local_schema:
		return {Reading.CRONITER: _compiled(" ".join(fields), zone, days_both=False)}
	if len(fields) != 5:
		return {}
	wall_zone = None if fields[1] == "*" or config_zone == UTC else config_zone
	rust_days = _rust_weekdays(fields[4])
	both = not fields[2].startswith("*") and not fields[4].startswith(("*", "?"))
	return {
		Reading.RUST: None
		if rust_days is None
		else _compiled(" ".join(fields[:4] + [rust_days]), wall_zone, days_both=both),
		Reading.CRONITER: _compiled(" ".join(fields), wall_zone, days_both=False),
	}


def changed(
	row: Mapping[str, Any],
	values: Mapping[str, Any],
	*,
	local_schema: bool,
	config_zone: str | None,
	system_zone: str,
	now: datetime,
) -> MomentChange | None:
	"""How the row's moments change once `values` are written, or None when BTU fires it as the original did
	(or when neither fires it: a row BTU cannot read is listed by the scheduler)."""
	merged = {key: row.get(key) for key in SPEC_FIELDS} | dict(values)
	try:
		spec = ScheduleSpec.from_row(merged, system_time_zone=system_zone)
	except ScheduleError:
		return None
	originals = original_crons(
		row.get("cron_string"), local_schema=local_schema, zone=spec.zone_name, config_zone=config_zone
	)
	since = _first_difference(originals, spec, now) if originals else None
	if since is None:
		return None
	return MomentChange(
		since=since,
		before={reading: _next(original, since, SHOWN) for reading, original in originals.items()},
		after=tuple(spec.preview(SHOWN, since)),
		zone=spec.zone_name,
		keep=_keep(originals, now),
	)


def describe(change: MomentChange) -> str:
	"""The change in one line: the original's moments per reading, BTU's, and the cron that keeps the original's."""
	where = "UTC" if change.zone == UTC else f"UTC, and in {change.zone}"
	readings = list(change.before)
	if len(set(change.before.values())) == 1:
		before = _moments(change.before[readings[0]], change.zone)
	else:
		before = "; ".join(f"{_moments(change.before[r], change.zone)} under {r.value}" for r in readings)
	text = f"next fires ({where}): the original BTU's {before}; BTU's {_moments(change.after, change.zone)}"
	if change.keep:
		cron, zone = change.keep
		text += f". For the original's moments make it Cron Style '{cron}' in {zone}"
	return text


def _compiled(cron: str, zone: str | None, *, days_both: bool) -> OriginalCron | None:
	try:
		return OriginalCron(CronExpression(cron), zone, days_both)
	except ScheduleError:
		return None


def _rust_weekdays(field: str) -> str | None:
	"""The Rust daemon's day-of-week (1-7 from Sunday) as BTU's (0-6 from Sunday); None when it refused it."""
	out = []
	for token in field.lower().split(","):
		base, slash, step = token.partition("/")
		if base in ("*", "?"):
			out.append(token)
			continue
		ends = []
		for item in base.split("-"):
			if item.isdigit() and 1 <= int(item) <= 7:
				ends.append(str(int(item) - 1))
			elif item[:3] in DAYS:
				ends.append(item)
			else:
				return None
		out.append("-".join(ends) + slash + step)
	return ",".join(out)


def _local(naive: datetime, zone) -> datetime | None:
	"""`naive` on `zone`'s wall clock as UTC; None when that time does not exist there or comes twice."""
	moment = naive.replace(tzinfo=zone)
	if moment.astimezone(timezone.utc).astimezone(zone).replace(tzinfo=None) != naive:
		return None
	if moment.replace(fold=1).utcoffset() != moment.utcoffset():
		return None
	return moment.astimezone(timezone.utc)


def _next(original: OriginalCron | None, since: datetime, n: int) -> tuple[datetime, ...]:
	if original is None:
		return ()
	out = []
	for moment in original.moments(since):
		out.append(moment)
		if len(out) == n:
			break
	return tuple(out)


def _keep(originals: Mapping[Reading, OriginalCron | None], now: datetime) -> tuple[str, str] | None:
	"""A cron and zone BTU fires at every reading's moments over the horizon; None when the readings differ or
	no BTU cron does."""
	found = {original.back_in_btu() if original else None for original in originals.values()}
	if len(found) != 1 or None in found:
		return None
	cron, zone = found.pop()
	spec = ScheduleSpec(name="keep", zone_name=zone, kind="cron", cron=cron)
	return None if _first_difference(originals, spec, now) else (cron, zone_name(parse_zone(zone)))


def _first_difference(
	originals: Mapping[Reading, OriginalCron | None], spec: ScheduleSpec, now: datetime
) -> datetime | None:
	"""The first sampled moment from which some reading's next moments are not `spec`'s, or None."""
	since = now
	while since < now + HORIZON:
		after = tuple(spec.preview(PER_SAMPLE, since))
		if any(_next(original, since, PER_SAMPLE) != after for original in originals.values()):
			return since
		since += SAMPLE_EVERY
	return None


def _moments(moments: tuple[datetime, ...], zone: str) -> str:
	if not moments:
		return "no moment (its daemon refused the cron)"
	local = parse_zone(zone)
	shown = []
	for moment in moments:
		text = moment.strftime("%a %Y-%m-%d %H:%M")
		if zone != UTC:
			text += moment.astimezone(local).strftime(" (%a %H:%M)")
		shown.append(text)
	return ", ".join(shown)
