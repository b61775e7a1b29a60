"""Reading what a reconcile reads of a site before its rows (`site_read.SiteRead`), one site or many side by side.

A full reconcile reads every site so, side by side on the database servers' bounded connections,
before it takes the reconciler's lock: most passes find nothing changed, and the reads are
what a pass over a thousand sites costs; with the bench's reader login, many sites of one server
are read in one query (`server_read`).
"""

from __future__ import annotations

import json
import threading
from concurrent.futures import ThreadPoolExecutor

from btu.scheduler_daemon.reads import site_settings
from btu.scheduler_daemon.reads.bench import Bench, Site
from btu.scheduler_daemon.reads.database import DatabaseError, SiteDatabase
from btu.scheduler_daemon.reads.server_read import ServerReader
from btu.scheduler_daemon.reads.site_read import SiteRead
from btu.scheduler_daemon.reads.site_settings import SiteSettings
from btu.shared.job_contract import FRAPPE_EXECUTOR

# A full reconcile reads sites' settings with at most this many threads (fewer: db_max_connections per server).
MAX_READ_THREADS = 32


def read_site(db: SiteDatabase, bench: Bench, executor: str, checksum: bool) -> SiteRead | None:
	"""The site's zone, whether it is held and whether BTU fires its Scheduled Job Types (with `checksum`, the
	summary of its rows too), in one query on its own login; None when it is not a BTU site. Raises DatabaseError."""
	settings = site_settings.read(db, checksum=checksum, scheduled_jobs=may_fire_jobs(db.site, executor))
	return None if settings is None else site_read_of(db, bench, executor, settings)


def may_fire_jobs(site: Site, executor: str) -> bool:
	"""Whether BTU may fire the site's Scheduled Job Types, before its settings are read."""
	return executor == FRAPPE_EXECUTOR and not site.config.get("disable_scheduler")


def site_read_of(db: SiteDatabase, bench: Bench, executor: str, settings: SiteSettings) -> SiteRead:
	site = db.site
	held = site.paused or (None if settings.btu_enabled else "BTU Configuration.enabled = 0")
	# Switched on in BTU Configuration, with Frappe's scheduler enabled for the site (`bench enable-scheduler`; not
	# `disable_scheduler` in its config) and jobs of the frappe executor, which run them in a Frappe worker.
	# Maintenance mode and pause_scheduler hold the whole site.
	on = may_fire_jobs(site, executor) and settings.fire_frappe_jobs and settings.scheduler_enabled
	interval = site.config.get("scheduler_interval")
	context = (
		f"{settings.time_zone}|{bool(held)}|{executor}|{json.dumps(bench.queue_timeouts, sort_keys=True)}"
		f"|{bench.app_files.fingerprint}"
		f"|{on}|{interval}"
	)
	return SiteRead(
		db=db,
		system_tz=settings.time_zone,
		held=held,
		context=context,
		scheduled_jobs=on,
		scheduler_interval=interval,
		summary=settings.summary(on) if settings.summaries is not None else None,
	)


def read_sites(
	dbs: list[SiteDatabase],
	bench: Bench,
	executor: str,
	connections_per_server: int,
	reader: ServerReader | None = None,
	stopping: threading.Event | None = None,
) -> dict[str, SiteRead | None | DatabaseError]:
	"""Each site's `read_site` with its checksum (None: not a BTU site; a DatabaseError: it did not answer): with the
	bench's `reader`, many sites of a MariaDB server in one query (`server_read`), the rest each on its own login.
	Read by one thread fewer than the database servers have connections: one stays free for an RPC's edit, which
	then never waits for a connection behind a reconcile's reads. Once `stopping` is set, the reads not begun are
	left out (the caller gives up the cycle)."""
	jobs = {db.site.name: may_fire_jobs(db.site, executor) for db in dbs}
	batches, alone = reader.batches(dbs, jobs) if reader is not None else ([], dbs)

	def stopped() -> bool:
		return stopping is not None and stopping.is_set()

	def read(db: SiteDatabase) -> dict[str, SiteRead | None | DatabaseError]:
		if stopped():
			return {db.site.name: None}
		try:
			return {db.site.name: read_site(db, bench, executor, checksum=True)}
		except DatabaseError as exc:
			return {db.site.name: exc}

	def read_batch(batch: list[SiteDatabase]) -> dict[str, SiteRead | None | DatabaseError]:
		if stopped():
			return {db.site.name: None for db in batch}
		settings = reader.read(batch, jobs) or {}
		results: dict[str, SiteRead | None | DatabaseError] = {}
		for db in batch:
			if db.site.name in settings:
				results[db.site.name] = site_read_of(db, bench, executor, settings[db.site.name])
			else:  # the batch was refused or failed: each on its own login, which names what is wrong with which site
				results.update(read(db))
		return results

	work = [(read_batch, batch) for batch in batches] + [(read, db) for db in alone]
	servers = len({db.server for db in dbs}) or 1
	threads = max(1, min(len(work), (connections_per_server - 1) * servers, MAX_READ_THREADS))
	results: dict[str, SiteRead | None | DatabaseError] = {}
	if threads == 1:
		for function, argument in work:
			results.update(function(argument))
		return results
	with ThreadPoolExecutor(threads, thread_name_prefix="btu-site-read") as pool:
		for result in pool.map(lambda item: item[0](item[1]), work):
			results.update(result)
	return results
