"""Task functions the engine tests' `rq worker` processes run (rq executor).

Each records its run in the worker's own Redis, so a test sees which jobs
really ran: the list named by `key` gets the job's id (and, for the slow
task, when the run started and ended). The tests' dev benches install the
`tests` package as an app, and @runnable declares these.
"""

from __future__ import annotations

import json
import time
from datetime import timezone

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


@runnable
def run_once(database: dict) -> None:
	"""A delivery as the frappe executor's task runner handles it, without Frappe: under the slot's database lock
	(btu.btu_core.runs.slot_claim), run only if the slot has no Task Log, then write one. Every delivery is recorded in
	`btu_test_deliveries` of the site's database (never in the Redis a failover test kills), with whether it ran."""
	import pymysql

	from btu.btu_core.runs.slot_claim import LOG_FOR_SLOT_SQL, SlotLock, lock_key
	from btu.scheduler_daemon.store.jobs import parse_job_id
	from btu.shared.instants import format_utc_iso

	job = get_current_job()
	_, schedule, slot = parse_job_id(job.id)
	slot_utc = format_utc_iso(slot)
	conn = pymysql.connect(**database, autocommit=True)

	def sql(query, params):
		with conn.cursor() as cur:
			cur.execute(query, params)
			return cur.fetchall()

	try:
		with SlotLock(sql, "mariadb", lock_key(database["database"], schedule, slot_utc)):
			ran = not sql(LOG_FOR_SLOT_SQL, (schedule, slot_utc, 1))
			if ran:
				sql(
					"insert into `tabBTU Task Log` (name, creation, modified, schedule, slot_utc, status) "
					"values (%s, now(6), now(6), %s, %s, 'Succeeded')",
					(f"{schedule}|{slot_utc}", schedule, slot_utc),
				)
		enqueued = (
			job.enqueued_at if job.enqueued_at.tzinfo else job.enqueued_at.replace(tzinfo=timezone.utc)
		)  # rq 1.x: naive UTC
		sql(
			"insert into btu_test_deliveries (job_id, schedule, slot_utc, ran, enqueued, started) "
			"values (%s, %s, %s, %s, %s, %s)",
			(job.id, schedule, slot_utc, ran, enqueued.timestamp(), time.time()),
		)
	finally:
		conn.close()
