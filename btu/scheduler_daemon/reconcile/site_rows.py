"""What a reconcile reads of a site's rows to compile them, and, for sites this process never compiled, reading it
ahead of the reconciler's lock.

A cold start (or a new leader, or Redis that lost the state) compiles every row of every site: four or five
queries a site on its own login, most of which is waiting on the database. Under the lock, one site after
another, that was most of a thousand sites' cold start. A site not yet compiled is read ahead instead, side by
side on the servers' connections, while the reconciler compiles the sites read before it; under the lock it is
compiled from what was read only if nothing compiled it meanwhile (an RPC's edit): else it is read again there.
A site with more rows than a chunk is read under the lock, a chunk at a time, so its memory stays one chunk's.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from datetime import datetime

from btu.scheduler_daemon.reads import sources
from btu.scheduler_daemon.reads.bench import Site
from btu.scheduler_daemon.reads.database import DatabaseError
from btu.scheduler_daemon.reads.site_read import SiteRead
from btu.scheduler_daemon.reads.site_reader import MAX_READ_THREADS
from btu.shared.run_row import RunRow

# Rows compiled (and read) at a time: a site with 100k schedules costs the memory of one chunk, not of every row.
APPLY_CHUNK = 1000
# Rows a full reconcile brings in line under one hold of the reconciler's lock (`SiteSync.reconcile_rest`): an RPC's
# edit waits for this many at most (a read-ahead site, at most APPLY_CHUNK rows, is compiled in one hold).
HOLD_CHUNK = 250
# Sites read ahead of the one being compiled, per reading thread: enough to keep the reads ahead of the compile,
# few enough that the rows waiting stay a few chunks (all of them at once held 100 sites x 1,000 rows: 320 MB).
AHEAD_PER_THREAD = 2


@dataclass(frozen=True)
class SiteRows:
	"""A site's enabled rows as a reconcile compiles them, read before the lock (`read_ahead`)."""

	versions: dict[str, str]  # enabled run's key text -> its version (`SiteCompiler.row_versions`)
	rows: list[RunRow]  # every one of them
	logged: dict[str, str]  # schedule new to the state -> its newest logged slot


def read_chunk(
	read: SiteRead, names: list[str], in_state: set[str], now: datetime
) -> tuple[list[RunRow], dict[str, str]]:
	"""The rows of the runs `names` (their key texts), and the newest logged slot of each of them not `in_state` that
	resumes after it (`RunRow.resumes_after_logs`: a schedule)."""
	rows = sources.rows(read, names, now)
	new = [row.name for row in rows if row.resumes_after_logs and row.name not in in_state]
	return rows, read.db.last_logged_slots(new)


def read_ahead(
	sites: list[Site],
	reads: dict,
	cold: Callable[[Site, object], bool],
	rows_of: Callable[[SiteRead], SiteRows],
	connections: int,
) -> Iterator[tuple[Site, SiteRows | None]]:
	"""Each site with its rows read ahead (`rows_of`) when it is to be compiled whole (`cold`; else None), in the order
	given, while the caller works on the ones before, at most AHEAD_PER_THREAD sites a thread ahead of it: by one thread
	fewer than the servers have `connections`, as `read_sites`.
	A site whose read fails is left to the lock's path, which notes the failure."""

	def ahead(site: Site) -> SiteRows | None:
		read = reads[site.name]
		if not cold(site, read):
			return None
		try:
			return rows_of(read)
		except DatabaseError:
			return None

	wanted = [site for site in sites if cold(site, reads[site.name])]
	servers = len({reads[site.name].db.server for site in wanted}) or 1
	threads = min(len(wanted), (connections - 1) * servers, MAX_READ_THREADS)
	if threads < 1:
		yield from ((site, None) for site in sites)
		return
	pool = ThreadPoolExecutor(threads, thread_name_prefix="btu-rows-ahead")
	upcoming = iter(sites)
	pending: deque[tuple[Site, Future]] = deque()

	def read_next() -> None:
		site = next(upcoming, None)
		if site is not None:
			pending.append((site, pool.submit(ahead, site)))

	try:
		for _ in range(threads * AHEAD_PER_THREAD):
			read_next()
		while pending:
			site, rows = pending.popleft()
			read_next()
			yield site, rows.result()
	finally:
		pool.shutdown(wait=True, cancel_futures=True)  # a caller that stops early waits for the reads under way only
