"""Which slots of a schedule should have fired by now: the missed-fire alert's arithmetic.

Pure (no I/O, no frappe): the Desk's periodic alert check asks it for the
slots whose fire time plus a grace lies in the past, then looks for their Task
Logs. A slot catch-up skipped, or a fire lost, has none.
"""

from __future__ import annotations

from collections import deque
from datetime import datetime

from btu.shared.schedule import ScheduleSpec
from btu.shared.schedule.zones import posix_seconds, utc

# Enough for a minute-by-minute check of any schedule; a one-second interval over hours is cut to its newest slots.
MAX_SLOTS = 100
# Slots walked at most per call, so a dense schedule over a long window stays cheap.
MAX_STEPS = 20_000


def overdue_slots(
	spec: ScheduleSpec, since: datetime, now: datetime, grace_secs: int, limit: int = MAX_SLOTS
) -> list[datetime]:
	"""The newest `limit` slots s > `since` whose fire time (jitter included) + `grace_secs` <= `now`, oldest first
	(aware UTC).

	A walk the step cap cuts short starts again later (each time at least halving what is left), so the slots
	kept are the newest even then; only the older ones a dense schedule has beyond the cap go unseen."""
	until = posix_seconds(now, "now") - max(0, int(grace_secs))
	low = posix_seconds(since, "since") + 1
	while True:
		newest, cut_at = _walk(spec, low, until, limit)
		if cut_at is None:
			return [utc(s) for s in newest]
		low = max(low + 1, until - (cut_at - low) // 2)


def _walk(spec: ScheduleSpec, low: int, until: int, limit: int) -> tuple[deque[int], int | None]:
	"""The newest `limit` due slots from `low`, and where the step cap stopped the walk (None: it reached `until`)."""
	newest: deque[int] = deque(maxlen=max(1, limit))
	slot, steps = spec.first(low), 0
	while slot is not None and slot <= until and slot + spec.jitter_of(slot) <= until:
		if steps == MAX_STEPS:
			return newest, slot
		newest.append(slot)
		steps += 1
		slot = spec.first(slot + 1)
	return newest, None
