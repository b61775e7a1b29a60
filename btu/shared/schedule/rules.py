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
		"""The last `keep` slots before `stop`, found in growing spans back from `high`; the count is at least
		theirs."""
		span = LOOK_BACK
		while True:
			begin = max(low, high - span)
			found: list[int] = []
			slot = self.first(begin)
			while slot is not None and slot < stop:
				found.append(slot)
				slot = self.first(slot + 1)
			if len(found) >= keep or begin == low:
				return Tally(max(counted, len(found)), found[max(0, len(found) - keep) :], True)
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


class ExcludingRule(Rule):
	"""A rule's slots less the exclusions: slots skipped on request, and slots on a calendar's excluded dates.

	Excluded dates are local days of the schedule's zone (whole days since
	1970-01-01 on its wall clock). Under "skip" their slots are dropped; under
	"move" each fires at its wall time on the next day not excluded, through
	the zone's clock (a wall time a DST gap skips there fires at the
	transition, a repeated one at its first occurrence), and a moved slot that
	meets a regular one, or another moved one, is one slot. Skipped slots are
	instants of the result: a moved slot can be skipped too. Tallies enumerate
	first(), within their budget.
	"""

	__slots__ = ("base", "skipped", "excluded", "move", "clock")

	def __init__(
		self, base: Rule, clock: ZoneClock, skipped: frozenset[int], excluded: frozenset[int], move: bool
	) -> None:
		self.base = base
		self.clock = clock
		self.skipped = skipped
		self.excluded = excluded
		self.move = move

	def first(self, t: int) -> int | None:
		while True:
			slot = self.calendar_first(t)
			if slot is None or slot not in self.skipped:
				return slot
			t = slot + 1

	def calendar_first(self, t: int) -> int | None:
		"""The first slot at or after t with the calendar applied, skipped slots included."""
		if not self.excluded:
			return self.base.first(t)
		if self.move:
			return self._moved_first(t)
		clock, base = self.clock, self.base
		while True:
			slot = base.first(t)
			if slot is None:
				return None
			day = clock.wall(slot) // DAY
			if day not in self.excluded:
				return slot
			# max(): a fall-back across midnight repeats the day's last wall times after the next one began.
			t = max(slot + 1, clock.instant((day + 1) * DAY))

	def day_of(self, slot: int) -> int:
		"""The local day of an instant."""
		return self.clock.wall(slot) // DAY

	def _moved_first(self, t: int) -> int | None:
		clock, base, excluded = self.clock, self.base, self.excluded
		day = clock.wall(t) // DAY
		while True:
			while day in excluded:
				day += 1
			best = self._regular_on(day, t)
			source = day - 1
			# Nothing lands before t: a slot at t ends the walk back over a long run of excluded days.
			while source in excluded and best != t:
				moved = self._moved_from(source, day, t)
				if moved is not None and (best is None or moved < best):
					best = moved
				source -= 1
			if best is not None:
				return best
			# Nothing at or after t lands on `day`: go to the day of the next slot (days without slots receive none).
			following = base.first(max(t, clock.instant((day + 1) * DAY)))
			if following is None:
				return None
			day = max(day + 1, clock.wall(following) // DAY)

	def _regular_on(self, day: int, t: int) -> int | None:
		"""The first slot of the rule at or after t on local day `day`."""
		slot = self.base.first(max(t, self.clock.instant(day * DAY)))
		while slot is not None and self.clock.wall(slot) // DAY < day:
			slot = self.base.first(slot + 1)
		return slot if slot is not None and self.clock.wall(slot) // DAY == day else None

	def _moved_from(self, source: int, day: int, t: int) -> int | None:
		"""The first slot of excluded day `source`, at its wall time on `day`, that lands at or after t."""
		clock = self.clock
		# Wall times of `day` whose instant may be >= t: from just after t - 1's wall time (this keeps the wall times
		# a spring-forward gap skips, which land on the transition instant t).
		low = max(0, clock.wall(t - 1) + 1 - day * DAY)
		if low >= DAY:
			return None
		slot = self.base.first(clock.instant(source * DAY + low))
		while slot is not None and clock.wall(slot) // DAY == source:
			moved = clock.instant(day * DAY + clock.wall(slot) - source * DAY)
			if moved >= t:
				return moved
			slot = self.base.first(slot + 1)
		return None

	def moved_from(self, slot: int) -> int | None:
		"""The local day a slot was moved from (the nearest excluded day with a slot at its wall time), else None."""
		if not self.move or not self.excluded:
			return None
		day = self.day_of(slot)
		if self._regular_on(day, slot) == slot:
			return None
		source = day - 1
		while source in self.excluded:
			if self._moved_from(source, day, slot) == slot:
				return source
			source -= 1
		return None
