"""The job every system under test enqueues: it notes when it was enqueued and when it started.

Importable by any rq (1.15 to 3.x) worker started from the repository root; it needs nothing but rq.
"""

from __future__ import annotations

import time
from datetime import timezone

from rq import get_current_job

STARTS_KEY = "benchmark:starts"


def record(i: int = 0, **kwargs) -> None:
	"""Push "<i> <enqueued_at epoch> <started epoch>" onto `STARTS_KEY`."""
	started = time.time()
	job = get_current_job()
	enqueued = job.enqueued_at
	if enqueued.tzinfo is None:  # rq 1.x keeps naive UTC
		enqueued = enqueued.replace(tzinfo=timezone.utc)
	job.connection.rpush(STARTS_KEY, f"{i} {enqueued.timestamp():.6f} {started:.6f}")
