"""Task functions the engine tests' `rq worker` processes run (rq executor).

Each records its run in the worker's own Redis, so a test sees which jobs
really ran: the list named by `key` gets the job's id (and, for the slow
task, when the run started and ended). The tests' dev benches install the
`tests` package as an app, and @runnable declares these.
"""

from __future__ import annotations

import json
import time

from rq import get_current_job

from btu import runnable


@runnable
def record(key: str) -> None:
	job = get_current_job()
	job.connection.rpush(key, job.id)


@runnable
def record_slowly(key: str, seconds: float) -> None:
	job = get_current_job()
	started = time.time()
	time.sleep(seconds)
	job.connection.rpush(key, json.dumps({"id": job.id, "started": started, "ended": time.time()}))


def record_undeclared(key: str) -> None:
	"""Like `record`, but not declared: the scheduler must never queue it (rq executor)."""
	job = get_current_job()
	job.connection.rpush(key, job.id)
