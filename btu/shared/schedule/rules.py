"""When a schedule has slots, ignoring its start, end and run limit.

Each rule answers `first(t)`: the first slot instant (whole POSIX seconds)
at or after t, or None. Cron rules walk the zone's constant-offset segments
and apply Debian cron(8)'s DST rule; interval rules are arithmetic.
"""

from __future__ import annotations

from btu.shared.schedule.cron import HORIZON_YEARS, CronExpression
from btu.shared.schedule.zones import DAY, ZoneClock

HORIZON = HORIZON_YEARS * 366 * DAY


class CronRule:
	"""Slots of a cron expression evaluated on the zone's wall clock.

	Real-time expressions (minute or hour starting with `*`) fire at every
	instant whose wall time matches: wall times skipped by spring-forward
	never occur, repeated ones fire in both passes. Fixed-time expressions
	fire once per matching wall time: at its first occurrence when repeated,
	and at the transition instant when skipped (several skipped times give
	one fire).
	"""

	__slots__ = ("expr", "clock")

	def __init__(self, expr: CronExpression, clock: ZoneClock) -> None:
		self.expr = expr
		self.clock = clock

	def first(self, t: int) -> int | None:
		expr, clock = self.expr, self.clock
		fixed_time = not expr.real_time
		while True:
			seg = clock.segment(t)
			offset = seg.offset
			low = t + offset
			if fixed_time and seg.before != offset:
				if seg.before > offset:
					# After a fall-back: wall times up to the transition already occurred.
					low = max(low, seg.start + seg.before)
				elif t == seg.start and expr.next_match(seg.start + seg.before, seg.start + offset) is not None:
					return seg.start
			high = seg.end + offset if seg.end is not None else low + HORIZON
			wall = expr.next_match(low, high)
			if wall is not None:
				return wall - offset
			if seg.end is None:
				return None
			t = seg.end


class IntervalRule:
	"""Slots origin + k * every (k >= 0) in real time; they never drift."""

	__slots__ = ("origin", "every")

	def __init__(self, origin: int, every: int) -> None:
		self.origin = origin
		self.every = every

	def first(self, t: int) -> int:
		if t <= self.origin:
			return self.origin
		return self.origin + -(-(t - self.origin) // self.every) * self.every

	def count(self, low: int, high: int) -> int:
		"""Slots in [low, high)."""
		if high <= low:
			return 0
		return max(0, (self.first(high) - self.first(low)) // self.every)


class OnceRule:
	"""A single slot."""

	__slots__ = ("at",)

	def __init__(self, at: int) -> None:
		self.at = at

	def first(self, t: int) -> int | None:
		return self.at if self.at >= t else None
