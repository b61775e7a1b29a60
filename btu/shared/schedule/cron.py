"""Cron expressions: validation with field-naming messages, expansion, and
fast matching on local wall-clock time.

Parsing, expansion and matching are all BTU's own, so what an expression
means never depends on the installed croniter (Frappe v15 ships 2.0, v16
ships 6.0, and they disagree: 6.0 refuses day-of-week 7, 7.0 reads a-a as a
wrap-around range). croniter's stepping over aware datetimes is also wrong
around DST changes (a nonexistent 02:30 returned as if it existed, fall-back
runs skipped or doubled; see tests/schedule/test_croniter_dst.py). Here a
cron expression only answers "the first matching wall time at or after w".

Dialect: 5 fields (minute hour day-of-month month day-of-week) or 6 with
leading seconds; lists, ranges, steps (`*/n`, `a-b/n`, `a/n` = a-max/n),
month names jan..dec, day names sun..sat, 0 and 7 are Sunday; @hourly
@daily @midnight @weekly @monthly @yearly @annually. As in Vixie cron, when
both day fields are restricted (neither starts with `*`) a day matches
either; otherwise both must match.
"""

from __future__ import annotations

import calendar
from bisect import bisect_left
from datetime import date
from functools import lru_cache

from btu.shared.messages import _
from btu.shared.schedule.errors import ScheduleError
from btu.shared.schedule.zones import DAY

MACROS = {
	"@hourly": "0 * * * *",
	"@daily": "0 0 * * *",
	"@midnight": "0 0 * * *",
	"@weekly": "0 0 * * 0",
	"@monthly": "0 0 1 * *",
	"@yearly": "0 0 1 1 *",
	"@annually": "0 0 1 1 *",
}
MONTHS = ("jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec")
DAYS = ("sun", "mon", "tue", "wed", "thu", "fri", "sat")
# name, low, high (high of day-of-week is 7: both 0 and 7 are Sunday), names
FIELDS = {
	"second": (0, 59, None),
	"minute": (0, 59, None),
	"hour": (0, 23, None),
	"day-of-month": (1, 31, None),
	"month": (1, 12, MONTHS),
	"day-of-week": (0, 7, DAYS),
}
FIVE = ("minute", "hour", "day-of-month", "month", "day-of-week")
SIX = ("second",) + FIVE
# The largest value `a/n` runs to; day-of-week stops at Saturday.
STEP_TOP = {"second": 59, "minute": 59, "hour": 23, "day-of-month": 31, "month": 12, "day-of-week": 6}
ORDINAL_1970 = date(1970, 1, 1).toordinal()
MONTH_DAYS = (0, 31, 29, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31)
# Every day-of-month/day-of-week/month combination recurs within 400 years.
HORIZON_YEARS = 400


class CronExpression:
	"""A validated cron expression and its wall-clock matcher."""

	__slots__ = (
		"text",
		"canonical",
		"seconds",
		"minutes",
		"hours",
		"doms",
		"months",
		"dows",
		"dom_star",
		"dow_star",
		"real_time",
		"_days",
	)

	def __init__(self, text: str, field: str = "cron_string") -> None:
		self.text = text
		source = " ".join((text or "").split())
		if not source:
			raise ScheduleError(
				field, text, _("is empty; give 5 fields (minute hour day-of-month month day-of-week), e.g. 0 9 * * 1-5")
			)
		if source.startswith("@"):
			if source.lower() not in MACROS:
				raise ScheduleError(
					field, text, _("unknown macro {macro}; use one of {macros}"), macro=source, macros=", ".join(MACROS)
				)
			source = MACROS[source.lower()]
		parts = source.split(" ")
		if len(parts) == 5:
			names = FIVE
		elif len(parts) == 6:
			names = SIX
		else:
			raise ScheduleError(
				field,
				text,
				_(
					"has {count} fields; use 5 (minute hour day-of-month month day-of-week) "
					"or 6 (second minute hour day-of-month month day-of-week)"
				),
				count=len(parts),
			)
		normal = {name: _normalise(field, text, name, part) for name, part in zip(names, parts)}
		normal.setdefault("second", "0")
		self.canonical = " ".join(normal[name] for name in names)
		sets = {name: _expand(name, normal[name]) for name in SIX}
		self.seconds = sets["second"]
		self.minutes = sets["minute"]
		self.hours = sets["hour"]
		self.doms = sets["day-of-month"]
		self.months = sets["month"]
		self.dows = frozenset(sets["day-of-week"])
		self.dom_star = normal["day-of-month"].startswith("*")
		self.dow_star = normal["day-of-week"].startswith("*")
		# Debian cron(8): a wildcard minute or hour runs in real time through DST changes.
		self.real_time = normal["minute"].startswith("*") or normal["hour"].startswith("*")
		self._days: dict[int, tuple[int, ...]] = {}
		if not self.dom_star and not self.dow_star:
			return  # either day field suffices, so some day always matches
		longest = max(MONTH_DAYS[m] for m in self.months)
		if not self.dom_star and self.doms[0] > longest:
			month_names = ", ".join(calendar.month_name[m] for m in self.months)
			raise ScheduleError(
				field,
				text,
				_("day-of-month {day} never occurs in {months}; pick a day that exists"),
				day=self.doms[0],
				months=month_names,
			)
		if self.next_match(0, 0 + HORIZON_YEARS * 366 * DAY) is None:
			raise ScheduleError(field, text, _("never matches any date; check day-of-month, month and day-of-week"))

	def _month_days(self, year: int, month: int) -> tuple[int, ...]:
		"""Matching days of one month, by the Vixie day-of-month/day-of-week rule."""
		key = year * 13 + month
		days = self._days.get(key)
		if days is None:
			first_dow, length = calendar.monthrange(year, month)
			first_dow = (first_dow + 1) % 7  # cron counts from Sunday = 0
			dows, doms = self.dows, self.doms
			either = not self.dom_star and not self.dow_star
			out = []
			for day in range(1, length + 1):
				in_dow = (first_dow + day - 1) % 7 in dows
				in_dom = day in doms
				if (in_dom or in_dow) if either else (in_dom and in_dow):
					out.append(day)
			days = tuple(out)
			if len(self._days) > 2048:
				self._days.clear()
			self._days[key] = days
		return days

	def next_match(self, wall: int, limit: int) -> int | None:
		"""The first matching wall second >= `wall` and < `limit`, else None."""
		days_total, rest = divmod(wall, DAY)
		d = date.fromordinal(ORDINAL_1970 + days_total)
		year, month, day = d.year, d.month, d.day
		hour, rest = divmod(rest, 3600)
		minute, second = divmod(rest, 60)
		limit_year = date.fromordinal(ORDINAL_1970 + min(limit // DAY, 2_900_000)).year
		months, hours, minutes, seconds = self.months, self.hours, self.minutes, self.seconds
		while True:
			if year > limit_year:
				return None
			i = bisect_left(months, month)
			if i == len(months):
				year, month, day, hour, minute, second = year + 1, months[0], 1, 0, 0, 0
				continue
			if months[i] != month:
				month, day, hour, minute, second = months[i], 1, 0, 0, 0
			days = self._month_days(year, month)
			i = bisect_left(days, day)
			if i == len(days):
				month, day, hour, minute, second = month + 1, 1, 0, 0, 0
				if month > 12:
					year, month = year + 1, 1
				continue
			if days[i] != day:
				day, hour, minute, second = days[i], 0, 0, 0
			i = bisect_left(hours, hour)
			if i == len(hours):
				day, hour, minute, second = day + 1, 0, 0, 0
				continue
			if hours[i] != hour:
				hour, minute, second = hours[i], 0, 0
			i = bisect_left(minutes, minute)
			if i == len(minutes):
				hour, minute, second = hour + 1, 0, 0
				continue
			if minutes[i] != minute:
				minute, second = minutes[i], 0
			i = bisect_left(seconds, second)
			if i == len(seconds):
				minute, second = minute + 1, 0
				continue
			second = seconds[i]
			found = (date(year, month, day).toordinal() - ORDINAL_1970) * DAY + hour * 3600 + minute * 60 + second
			return found if found < limit else None


@lru_cache(maxsize=4096)
def compile_cron(text: str) -> CronExpression:
	"""The CronExpression of `text`, shared: thousands of schedules usually use a handful of expressions."""
	return CronExpression(text)


def _normalise(field: str, text: str, name: str, part: str) -> str:
	"""Check one field and rewrite it in numbers only (names, `a/n` resolved)."""
	low, high, names = FIELDS[name]
	out = []
	for token in part.lower().split(","):
		if not token:
			raise ScheduleError(
				field, text, _("{name} '{part}' has an empty list item; remove the extra comma"), name=name, part=part
			)
		base, slash, step = token.partition("/")
		if slash:
			if not step.isdigit() or int(step) == 0:
				raise ScheduleError(
					field, text, _("{name} step '/{step}' must be a whole number of 1 or more"), name=name, step=step
				)
		if base == "*":
			out.append(token)
			continue
		first, dash, last = base.partition("-")
		a = _value(field, text, name, first, low, high, names)
		if dash:
			b = _value(field, text, name, last, low, high, names)
			if b < a:
				raise ScheduleError(
					field,
					text,
					_("{name} range {span} runs backwards; write it as low-high, or as two ranges"),
					name=name,
					span=base,
				)
		else:
			b = max(a, STEP_TOP[name]) if slash else a
		# A single value alone, never a-a: the canonical text is shown to users and compared.
		out.append(str(a) if a == b else f"{a}-{b}/{step}" if slash else f"{a}-{b}")
	return ",".join(out)


def _expand(name: str, normal: str) -> tuple[int, ...]:
	"""The sorted values of one field in _normalise's form; day-of-week 7 is Sunday, 0."""
	low, high = FIELDS[name][:2]
	if name == "day-of-week":
		high = 6  # "*" and "*/n" run over Sunday to Saturday once
	values = set()
	for token in normal.split(","):
		base, _slash, step = token.partition("/")
		if base == "*":
			a, b = low, high
		else:
			first, _dash, last = base.partition("-")
			a = int(first)
			b = int(last) if last else a
		values.update(range(a, b + 1, int(step or 1)))
	if name == "day-of-week" and 7 in values:
		values.discard(7)
		values.add(0)
	return tuple(sorted(values))


def _value(field: str, text: str, name: str, item: str, low: int, high: int, names: tuple[str, ...] | None) -> int:
	if item.isdigit():
		value = int(item)
		if not low <= value <= high:
			raise ScheduleError(
				field, text, _("{name} {value} is outside {low}-{high}"), name=name, value=value, low=low, high=high
			)
		return value
	if names and item in names:
		return names.index(item) + (1 if name == "month" else 0)
	if item in ("l", "w", "?", "h") or "#" in item or item.endswith(("l", "w")):
		raise ScheduleError(
			field,
			text,
			_(
				"{name} '{item}' is not supported (BTU cron has no L, W, ?, # or H); "
				"use numbers, names, lists, ranges and steps"
			),
			name=name,
			item=item,
		)
	if names:
		listed = ", ".join(names)
		raise ScheduleError(
			field,
			text,
			_("{name} '{item}' is neither a number {low}-{high} nor a name ({names})"),
			name=name,
			item=item,
			low=low,
			high=high,
			names=listed,
		)
	raise ScheduleError(
		field, text, _("{name} '{item}' is not a number {low}-{high}"), name=name, item=item, low=low, high=high
	)
