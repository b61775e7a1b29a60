"""Time zones as the schedule engine needs them: offsets, transitions, wall time.

Instants are whole POSIX seconds (UTC). A "wall" time is the local clock
reading expressed the same way (seconds since 1970-01-01 00:00 local), so
wall = instant + offset. zoneinfo exposes no list of transitions, so each UTC
year is scanned in steps of one day and every change of offset is bisected
to the second. The result is cached per zone and year.
"""

from __future__ import annotations

import math
import re
from bisect import bisect_right
from datetime import datetime, timedelta, timezone, tzinfo
from zoneinfo import ZoneInfo

from btu.shared.messages import _
from btu.shared.schedule.errors import ScheduleError

DAY = 86400
EPOCH = datetime(1970, 1, 1)
_OFFSET = re.compile(r"^(?:UTC|GMT)?([+-])(\d{1,2}):?(\d{2})$")


def parse_zone(name: str | None, default: str | None = None) -> tzinfo:
	"""The tzinfo for an IANA name, "UTC" or a fixed offset like "+05:30".

	An empty `name` falls back to `default`; bad input raises ScheduleError
	for the field "time_zone".
	"""
	text = (name or "").strip() or (default or "").strip()
	if not text:
		raise ScheduleError(
			"time_zone",
			name,
			_("is empty; give an IANA zone such as America/New_York, or UTC, or an offset such as +05:30"),
		)
	if text.upper() in ("UTC", "Z", "GMT"):
		return timezone.utc
	match = _OFFSET.match(text)
	if match:
		sign, hours, minutes = match.groups()
		if int(hours) > 23 or int(minutes) > 59:
			raise ScheduleError("time_zone", text, _("offset is outside -23:59..+23:59"))
		delta = timedelta(hours=int(hours), minutes=int(minutes))
		return timezone(-delta if sign == "-" else delta)
	try:
		return ZoneInfo(text)
	except Exception:
		raise ScheduleError(
			"time_zone",
			text,
			_("is not a known IANA time zone (e.g. America/New_York, Europe/London) nor a UTC offset like +05:30"),
		) from None


def zone_name(zone: tzinfo) -> str:
	"""The canonical text of a zone returned by parse_zone."""
	if isinstance(zone, ZoneInfo):
		return zone.key
	offset = int(zone.utcoffset(None).total_seconds())
	if offset == 0:
		return "UTC"
	sign = "-" if offset < 0 else "+"
	return f"{sign}{abs(offset) // 3600:02d}:{abs(offset) % 3600 // 60:02d}"


def utc(instant: int) -> datetime:
	"""An instant as an aware UTC datetime."""
	return datetime.fromtimestamp(instant, timezone.utc)


def posix_seconds(moment: datetime, field: str) -> int:
	"""An aware datetime as an instant (the second it falls in); a naive one is a ScheduleError for `field`."""
	if moment.tzinfo is None:
		raise ScheduleError(field, moment, _("must be an aware datetime (with a time zone)"))
	return math.floor(moment.timestamp())


def wall_seconds(naive: datetime) -> int:
	"""A naive wall-clock datetime as whole wall seconds (microseconds dropped)."""
	delta = naive - EPOCH
	return delta.days * DAY + delta.seconds


def wall_datetime(wall: int) -> datetime:
	return EPOCH + timedelta(seconds=wall)


class Segment:
	"""A stretch of instants [start, end) with one UTC offset.

	`before` is the offset in force just before `start`: a larger offset
	means `start` ends a fall-back (wall times repeat), a smaller one means
	it ends a spring-forward gap. `end` is None when the offset never changes.
	Segments also break at UTC year boundaries (with before == offset).
	"""

	__slots__ = ("start", "end", "offset", "before")

	def __init__(self, start: int | None, end: int | None, offset: int, before: int) -> None:
		self.start = start
		self.end = end
		self.offset = offset
		self.before = before


class ZoneClock:
	"""Offsets, segments and wall-to-instant conversion for one zone."""

	def __init__(self, zone: tzinfo) -> None:
		self.zone = zone
		self.fixed = not isinstance(zone, ZoneInfo)
		self._years: dict[int, tuple[list[int], list[Segment]]] = {}
		if self.fixed:
			offset = int(zone.utcoffset(None).total_seconds())
			self._forever = Segment(None, None, offset, offset)

	def offset(self, instant: int) -> int:
		if self.fixed:
			return self._forever.offset
		return int(datetime.fromtimestamp(instant, self.zone).utcoffset().total_seconds())

	def segment(self, instant: int) -> Segment:
		"""The segment that contains `instant`."""
		if self.fixed:
			return self._forever
		year = (EPOCH + timedelta(seconds=instant)).year
		starts, segments = self._year(year)
		return segments[bisect_right(starts, instant) - 1]

	def transitions(self, year: int) -> list[Segment]:
		"""The real offset changes in one UTC year, as the segments they start."""
		if self.fixed:
			return []
		return [s for s in self._year(year)[1] if s.before != s.offset]

	def _year(self, year: int) -> tuple[list[int], list[Segment]]:
		cached = self._years.get(year)
		if cached is not None:
			return cached
		first = wall_seconds(datetime(year, 1, 1))
		last = wall_seconds(datetime(year + 1, 1, 1))
		offset = self.offset(first)
		starts = [first]
		segments = [Segment(first, None, offset, self.offset(first - 1))]
		low = first
		while low < last:
			high = min(low + DAY, last) - 1
			if self.offset(high) == offset:
				low = high + 1
				continue
			# The offset changes in (low, high]: bisect to its first second.
			a, b = low - 1, high
			if self.offset(low) == offset:
				a = low
			while b - a > 1:
				mid = (a + b) // 2
				if self.offset(mid) == offset:
					a = mid
				else:
					b = mid
			new = self.offset(b)
			segments[-1].end = b
			segments.append(Segment(b, None, new, offset))
			starts.append(b)
			offset = new
			low = b
		segments[-1].end = last
		if len(self._years) > 64:
			self._years.clear()
		self._years[year] = (starts, segments)
		return starts, segments

	def wall(self, instant: int) -> int:
		return instant + self.segment(instant).offset

	def instant(self, wall: int) -> int:
		"""The instant of a wall time: its first occurrence when it repeats
		(fall-back), the end of the gap (the transition instant) when it is
		skipped (spring-forward)."""
		if self.fixed:
			return wall - self._forever.offset
		naive = wall_datetime(wall)
		guess = int(naive.replace(tzinfo=self.zone, fold=0).timestamp())
		if self.wall(guess) == wall:
			return guess
		# Skipped: find the transition whose gap holds this wall time.
		for probe in (guess, guess - DAY, guess + DAY):
			seg = self.segment(probe)
			if seg.before < seg.offset and seg.start + seg.before <= wall < seg.start + seg.offset:
				return seg.start
		for year in (naive.year - 1, naive.year, naive.year + 1):
			for seg in self.transitions(year):
				if seg.before < seg.offset and seg.start + seg.before <= wall < seg.start + seg.offset:
					return seg.start
		raise AssertionError(f"{zone_name(self.zone)}: wall time {naive} is neither present nor in a gap")


_CLOCKS: dict[str, ZoneClock] = {}


def clock_for(zone: tzinfo) -> ZoneClock:
	"""The shared ZoneClock of a zone (transition scans are cached per zone)."""
	key = zone_name(zone)
	clock = _CLOCKS.get(key)
	if clock is None:
		clock = _CLOCKS[key] = ZoneClock(zone)
	return clock
