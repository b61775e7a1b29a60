"""When a schedule has slots, ignoring its start, end and run limit.

Every rule answers the same two questions, so callers never ask which kind
it is: `first(t)`, the first slot instant (whole POSIX seconds) at or after
t, or None; and `tally(low, high, keep, budget, end)`, how many slots lie
in [low, high) up to end and the last `keep` of them. Cron rules walk the zone's
constant-offset segments and apply Debian cron(8)'s DST rule, and tally by
enumerating within a budget; interval rules are arithmetic.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass

from btu.shared.schedule.cron import HORIZON_YEARS, CronExpression
from btu.shared.schedule.zones import DAY, ZoneClock

HORIZON = HORIZON_YEARS * 366 * DAY
# Where a tally whose budget ran out starts looking back for its last slots; each retry looks 8 times further.
LOOK_BACK = 60


@dataclass
class Tally:
	"""Slots in a span: how many, the last few (oldest first), and whether `count` is only a lower bound."""

	count: int
	last: list[int]
	truncated: bool = False


class Budget:
	"""How many more slots the tallies of one plan may enumerate (arithmetic tallies take none)."""

	__slots__ = ("left",)

	def __init__(self, left: int) -> None:
		self.left = left

	def take(self) -> bool:
		"""Spend one slot; False when none is left."""
		if self.left <= 0:
			return False
		self.left -= 1
		return True


class Rule:
	"""The interface of every rule; tally() here enumerates first(), slot by slot."""

	__slots__ = ()

	def first(self, t: int) -> int | None:
		"""The first slot at or after instant t, or None."""
		raise NotImplementedError

	def tally(self, low: int, high: int, keep: int, budget: Budget, end: int | None = None) -> Tally:
		"""The slots in [low, high) up to `end` (low is a slot) and the last `keep` of them.

		Once the budget runs out the count stops there (truncated), and the
		last `keep` are found by looking back from `high` instead.
		"""
		stop = _stop(high, end)
		count, slot = 0, low
		last: deque[int] = deque(maxlen=keep)
		while slot is not None and slot < stop:
			if not budget.take():
				return self._look_back(low, high, stop, keep, count)
			count += 1
			last.append(slot)
			slot = self.first(slot + 1)
		return Tally(count, list(last))

	def _look_back(self, low: int, high: int, stop: int, keep: int, counted: int) -> Tally:
		"""The last `keep` slots before `stop`, found in growing spans back from `high`; the count is at least theirs."""
		span = LOOK_BACK
		while True:
			begin = max(low, high - span)
			found: list[int] = []
			slot = self.first(begin)
			while slot is not None and slot < stop:
				found.append(slot)
				slot = self.first(slot + 1)
			if len(found) >= keep or begin == low:
				return Tally(max(counted, len(found)), found[max(0, len(found) - keep):], True)
			span *= 8


def _stop(high: int, end: int | None) -> int:
	"""Where slots in [low, high) up to `end` stop."""
	return high if end is None else min(high, end + 1)


class CronRule(Rule):
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


class IntervalRule(Rule):
	"""Slots origin + k * every (k >= 0) in real time; they never drift."""

	__slots__ = ("origin", "every")

	def __init__(self, origin: int, every: int) -> None:
		self.origin = origin
		self.every = every

	def first(self, t: int) -> int:
		if t <= self.origin:
			return self.origin
		return self.origin + -(-(t - self.origin) // self.every) * self.every

	def tally(self, low: int, high: int, keep: int, budget: Budget, end: int | None = None) -> Tally:
		"""Exact and arithmetic, so it takes nothing from the budget."""
		stop = _stop(high, end)
		count = max(0, (self.first(stop) - self.first(low)) // self.every) if stop > low else 0
		last = low + (count - 1) * self.every
		return Tally(count, [last - i * self.every for i in range(min(keep, count) - 1, -1, -1)])


class OnceRule(Rule):
	"""A single slot."""

	__slots__ = ("at",)

	def __init__(self, at: int) -> None:
		self.at = at

	def first(self, t: int) -> int | None:
		return self.at if self.at >= t else None
