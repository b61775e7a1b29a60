"""What a reconcile reads of a site before its rows: its settings and the checksum of its rows, in one query.

A full reconcile reads every site so, side by side on the database servers' bounded connections,
before it takes the reconciler's lock: most passes find nothing changed, and the reads are
what a pass over a thousand sites costs.
"""

from __future__ import annotations

import json
import threading
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

from btu.shared.job_contract import FRAPPE_EXECUTOR
from btu.scheduler_daemon.bench import Bench
from btu.scheduler_daemon.database import DatabaseError, SiteDatabase

# A full reconcile reads sites' settings with at most this many threads (fewer: db_max_connections per server).
MAX_READ_THREADS = 32


@dataclass(frozen=True)
class SiteRead:
	"""What a reconcile reads of a site before its rows (one round trip: `SiteDatabase.settings`)."""

	db: SiteDatabase
	system_tz: str | None
	held: str | None  # why the site's schedules do not fire; None when they do
	# Whether BTU fires the site's Scheduled Job Types (see `read_site`), and Frappe's "All" interval for them.
	scheduled_jobs: bool
	scheduler_interval: object
	# What a compiled schedule depends on besides its row: when it changes, every row is compiled again.
	context: str
	summary: tuple | None  # (row count, checksum) of what fires, when read for a full reconcile


def read_site(db: SiteDatabase, bench: Bench, executor: str, checksum: bool) -> SiteRead | None:
	"""The site's zone, whether it is held and whether BTU fires its Scheduled Job Types (with `checksum`, the
	summary of its rows too), in one query; None when it is not a BTU site. Raises DatabaseError."""
	site = db.site
	may_fire_jobs = executor == FRAPPE_EXECUTOR and not site.config.get("disable_scheduler")
	settings = db.settings(checksum=checksum, scheduled_jobs=may_fire_jobs)
	if settings is None:
		return None
	held = site.paused or (None if settings.btu_enabled else "BTU Configuration.enabled = 0")
	# Switched on in BTU Configuration, with Frappe's scheduler enabled for the site (`bench enable-scheduler`; not
	# `disable_scheduler` in its config) and jobs of the frappe executor, which run them in a Frappe worker.
	# Maintenance mode and pause_scheduler hold the whole site.
	on = may_fire_jobs and settings.fire_frappe_jobs and settings.scheduler_enabled
	interval = site.config.get("scheduler_interval")
	context = (
		f"{settings.time_zone}|{bool(held)}|{executor}|{json.dumps(bench.queue_timeouts, sort_keys=True)}|{bench.app_files.fingerprint}"
		f"|{on}|{interval}"
	)
	return SiteRead(
		db=db, system_tz=settings.time_zone, held=held, context=context, scheduled_jobs=on, scheduler_interval=interval,
		summary=settings.summary(on) if checksum else None,
	)


def read_sites(
	dbs: list[SiteDatabase], bench: Bench, executor: str, connections_per_server: int, stopping: threading.Event | None = None,
) -> dict[str, SiteRead | None | DatabaseError]:
	"""Each site's `read_site` with its checksum (None: not a BTU site; a DatabaseError: it did not answer), read
	by one thread fewer than the database servers have connections: one stays free for an RPC's edit, which then
	never waits for a connection behind a reconcile's reads. Once `stopping` is set, the reads not begun are
	left out (the caller gives up the cycle)."""
	servers = len({db.server for db in dbs}) or 1
	threads = max(1, min(len(dbs), (connections_per_server - 1) * servers, MAX_READ_THREADS))

	def read(db: SiteDatabase) -> SiteRead | None | DatabaseError:
		if stopping is not None and stopping.is_set():
			return None
		try:
			return read_site(db, bench, executor, checksum=True)
		except DatabaseError as exc:
			return exc

	if threads == 1:
		return {db.site.name: read(db) for db in dbs}
	with ThreadPoolExecutor(threads, thread_name_prefix="btu-site-read") as pool:
		return {db.site.name: result for db, result in zip(dbs, pool.map(read, dbs))}
