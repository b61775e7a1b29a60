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


def overdue_slots(spec: ScheduleSpec, since: datetime, now: datetime, grace_secs: int, limit: int = MAX_SLOTS) -> list[datetime]:
	"""The newest `limit` slots s > `since` whose fire time (jitter included) + `grace_secs` <= `now`, oldest first (aware UTC)."""
	until = posix_seconds(now, "now") - max(0, int(grace_secs))
	newest: deque[int] = deque(maxlen=max(1, limit))
	slot = spec.first(posix_seconds(since, "since") + 1)
	for _ in range(MAX_STEPS):
		if slot is None or slot > until or slot + spec.jitter_of(slot) > until:
			break
		newest.append(slot)
		slot = spec.first(slot + 1)
	return [utc(s) for s in newest]

