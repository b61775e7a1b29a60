"""The catch-up planner: which of a schedule's slots to fire at a moment.

Pure: a ScheduleSpec, its pending slot and the time in, a FirePlan out. The
package docstring gives the rules (due, on time, missed, expired, policies).
"""

from __future__ import annotations

import math
from collections import deque
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Protocol

from btu.shared.schedule.rules import Budget, Rule, Tally
from btu.shared.schedule.zones import utc


class Plannable(Protocol):
	"""What the planner reads of a schedule: a `spec.ScheduleSpec`, which calls it (so spec imports this module, and
	this one names only what it reads)."""

	rule: Rule
	end: int | None
	run_limit: int | None
	jitter_secs: int
	catch_up_policy: str
	catch_up_window: timedelta
	catch_up_max: int

	def first(self, t: int) -> int | None: ...

	def jitter_of(self, slot: int) -> int: ...


# One plan enumerates at most this many cron slots to count a backlog.
COUNT_BUDGET = 10_000
# The most fires one catch-up may make (fire_all), and the most fires one plan returns: a longer
# catch-up goes out over several steps, so one step never builds more jobs than this.
MAX_CATCH_UP = 10_000
MAX_FIRES_PER_PLAN = 1_000


@dataclass
class FirePlan:
	"""What to do at `now` for a schedule whose pending slot is `cursor`."""

	fire: list[datetime]
	skipped: int
	expired: int
	next_cursor: datetime | None
	finished: bool
	count_truncated: bool = False


def plan(spec: Plannable, cursor: datetime, now: datetime, runs: int, grace: timedelta, ahead: timedelta) -> FirePlan:
	"""Which slots to fire at `now`, counting as due those whose fire time is at most `ahead` away.

	`runs` is how many times the schedule has fired (against its run_limit);
	`grace` is how late a fire may be and still be on time.
	"""
	remaining = spec.run_limit - runs if spec.run_limit else None
	if remaining is not None and remaining <= 0:
		return FirePlan([], 0, 0, None, True)
	walk = _Walk(spec, now, grace, ahead)
	slot = walk.due(walk.jump(spec.first(math.ceil(cursor.timestamp()))))
	fire = list(walk.tail) + walk.on_time
	skipped = walk.missed - len(walk.tail)
	finished = slot is None
	if remaining is not None and len(fire) >= remaining:
		fire = fire[:remaining]
		finished = True
	if len(fire) > MAX_FIRES_PER_PLAN:
		# The rest of a long catch-up is due at once: the next plan, from this cursor, fires it.
		slot, finished = fire[MAX_FIRES_PER_PLAN], False
		fire = fire[:MAX_FIRES_PER_PLAN]
	return FirePlan(
		fire=[utc(s) for s in fire],
		skipped=skipped,
		expired=walk.expired,
		next_cursor=None if finished else utc(slot),
		finished=finished,
		count_truncated=walk.truncated,
	)


class _Walk:
	"""One plan's pass over the slots from the cursor: the backlog jumped over, then the due slots one by one."""

	def __init__(self, spec: Plannable, now: datetime, grace: timedelta, ahead: timedelta) -> None:
		moment = now.timestamp()
		self.spec = spec
		self.due_by = math.floor(moment + ahead.total_seconds())  # due: fire_time <= now + ahead
		self.on_time_from = math.ceil(moment - grace.total_seconds())  # on time: fire_time >= this
		self.expired_before = math.ceil(moment - spec.catch_up_window.total_seconds())  # expired: slot < this
		# Slots before this are missed whatever their jitter: fire_time <= slot + jitter_secs.
		self.surely_missed = self.on_time_from - spec.jitter_secs
		self.keep = {"skip": 0, "fire_once": 1, "fire_all": spec.catch_up_max}[spec.catch_up_policy]
		self.budget = Budget(COUNT_BUDGET)
		self.truncated = False
		self.expired = 0
		self.missed = 0
		self.tail: deque[int] = deque(maxlen=self.keep)  # the missed slots that fire
		self.on_time: list[int] = []

	def jump(self, slot: int | None) -> int | None:
		"""Count the backlog from `slot` that is missed whatever its jitter without walking it; the slot after it."""
		boundary = min(self.expired_before, self.surely_missed)
		if slot is not None and slot < boundary:
			self.expired = self._tally(slot, boundary, 0).count
			slot = self.spec.first(boundary)
		if slot is not None and slot < self.surely_missed:
			tally = self._tally(slot, self.surely_missed, self.keep)
			self.missed = tally.count
			self.tail.extend(tally.last)
			slot = self.spec.first(self.surely_missed)
		return slot

	def due(self, slot: int | None) -> int | None:
		"""Sort the due slots from `slot` on into on time, missed and expired; the first slot not due, or None."""
		first, jitter_of = self.spec.first, self.spec.jitter_of
		while slot is not None:
			fire_at = slot + jitter_of(slot)
			if fire_at > self.due_by:
				break
			if fire_at >= self.on_time_from:
				self.on_time.append(slot)
			elif slot < self.expired_before:
				self.expired += 1
			else:
				self.missed += 1
				self.tail.append(slot)
			slot = first(slot + 1)
		return slot

	def _tally(self, low: int, high: int, keep: int) -> Tally:
		"""The rule's tally of the slots in [low, high) up to the schedule's end."""
		tally = self.spec.rule.tally(low, high, keep, self.budget, self.spec.end)
		self.truncated |= tally.truncated
		return tally
