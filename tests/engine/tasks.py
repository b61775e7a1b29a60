"""Task functions the engine tests' `rq worker` processes run (rq executor).

Each records its run in the worker's own Redis, so a test sees which jobs
really ran: the list named by `key` gets the job's id (and, for the slow
task, when the run started and ended).
"""

from __future__ import annotations

import json
import time

from rq import get_current_job


def record(key: str) -> None:
	job = get_current_job()
	job.connection.rpush(key, job.id)


def record_slowly(key: str, seconds: float) -> None:
	job = get_current_job()
	started = time.time()
	time.sleep(seconds)
	job.connection.rpush(key, json.dumps({"id": job.id, "started": started, "ended": time.time()}))
