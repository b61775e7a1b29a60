"""A site brought in line with its table: some schedules for an RPC's edit, under the reconciler's lock for the whole
edit; every schedule by a full reconcile, in holds of the lock short enough that an RPC's edit, of this site or another,
waits for one of them at most: the versions of a site's rows are read without the lock, and a site with more than
HOLD_CHUNK rows to bring in line is brought in line a chunk a hold, the edits waiting let in first between two holds
(`ReconcileLock`).

What may not be lost or doubled: an RPC comes after its edit's commit and reads its rows under the lock. The runs an
RPC brought in line after a site's reconcile began (`SiteSync.touched`) are left as the RPC left them, since this
reconcile's versions and rows may be older than the RPC's read; any other row is written as read here, and an edit
committed after that read brings its own RPC, which brings the row in line after this write (it waits for the hold).
"""

from __future__ import annotations

import logging
import threading
from dataclasses import dataclass, field

from btu.scheduler_daemon.log import log_event
from btu.scheduler_daemon.operations.metrics import Metrics
from btu.scheduler_daemon.reads.bench import Site, site_name_problem
from btu.scheduler_daemon.reads.connections import Connections
from btu.scheduler_daemon.reads.database import DatabaseError, SiteDatabase
from btu.scheduler_daemon.reads.site_read import SiteRead
from btu.scheduler_daemon.reads.site_reader import read_site
from btu.scheduler_daemon.reconcile.frappe_job_sites import FrappeJobSites
from btu.scheduler_daemon.reconcile.lock import ReconcileLock
from btu.scheduler_daemon.reconcile.site_compiler import SiteCompiler
from btu.scheduler_daemon.reconcile.site_health import SiteHealth
from btu.scheduler_daemon.reconcile.site_rows import APPLY_CHUNK, HOLD_CHUNK, SiteRows, read_chunk
from btu.scheduler_daemon.store.state import State
from btu.shared.keys import due_member
from btu.shared.run_row import RunRow

logger = logging.getLogger("btu.scheduler.reconcile")


@dataclass
class Diff:
	"""One site's reconcile between its holds of the reconciler lock (`SiteSync.reconcile_site`): what the first hold
	found, the versions read without the lock, and, for a site with more than HOLD_CHUNK rows to bring in line, what is
	left to do a chunk a hold (`reconcile_rest`)."""

	site: Site
	read: SiteRead
	summary: tuple  # the site's (table summary, context), kept once the state mirrors it
	retry: set[str]  # listed as invalid: compiled again
	ahead: SiteRows | None  # its rows read ahead of the lock (a cold site)
	enabled: dict[str, str] | None  # run -> its version (`SiteCompiler.row_versions`), read after the first hold
	resets: int  # `SiteCompiler.resets` at the first hold: a reset since (Redis lost the state) keeps no summary
	# Runs an RPC brought in line since the first hold (`SiteSync.touched`): it read their rows later, so this
	# reconcile leaves them as the RPC left them; a later edit brings its own RPC, after the hold that read the row.
	touched: set[str]
	removed: list[str] = field(default_factory=list)  # not enabled: taken out
	changed: list[str] = field(default_factory=list)  # changed since this process compiled them, new, or invalid
	in_state: set[str] = field(
		default_factory=set
	)  # the site's schedules in the state: the others' logged slots are read


class SiteSync:
	"""Brings a site's schedules in line with its table, under the reconcile lock as this module says: every schedule
	(`reconcile_site`, a full reconcile's) or those an RPC names (`sync_schedules`); notes each site's health and
	whether BTU fires its Scheduled Job Types. `stopping` is the process's stop: a reconcile under way gives up."""

	def __init__(
		self,
		compiler: SiteCompiler,
		state: State,
		clock,
		wake,
		site_health: SiteHealth,
		frappe_jobs: FrappeJobSites,
		connections: Connections,
		metrics: Metrics,
	):
		self.compiler = compiler
		self.state = state
		self.clock = clock  # callable returning Redis's now as an aware datetime
		self.wake = wake  # callable telling every process the state changed
		self.site_health = site_health
		self.frappe_jobs = frappe_jobs
		self.connections = connections
		self.metrics = metrics
		self.databases: dict[str, SiteDatabase] = {}
		# Held to diff and write the state: by the reconcile thread a site (a chunk of a big site: `Diff`) a hold, by
		# an RPC for its whole edit. Every write of a compiled row is made in the hold that read the row.
		self.lock = ReconcileLock()
		# site being reconciled a chunk a hold -> the runs RPCs brought in line meanwhile
		self.touched: dict[str, set[str]] = {}
		self.served: set[str] = set()  # BTU sites at the end of the last cycle
		self.stopping = threading.Event()

	def database(self, site: Site) -> SiteDatabase:
		"""The site's reads, made anew when its site_config.json changed."""
		db = self.databases.get(site.name)
		if db is None or db.site.config != site.config:
			db = self.databases[site.name] = SiteDatabase(site, self.connections)
		return db

	# -- some schedules, for RPC commands ------------------------------------------

	def sync_schedules(self, site_name: str, names: list[str]) -> None:
		"""Bring these schedules in line with their rows: kept or updated if enabled, removed if disabled or gone."""
		with self.lock.edit(), self.metrics.reconcile_timer("schedules"):
			self.compiler.check_generation()
			self.reconcile_schedules(self.compiler.bench.site(site_name), names)
			self.wake()

	def reconcile_schedules(self, site: Site, names: list[str]) -> bool:
		"""Like `reconcile_site` for these schedules of the site only."""
		db = self.database(site)
		try:
			read = read_site(db, self.compiler.bench, self.compiler.executor, checksum=False)
			if read is None:
				return False
			enabled = self.compiler.row_versions(read, names)
			self.site_answered(site, read.held)
			self.frappe_jobs.read_for_schedules(site.name, read.scheduled_jobs)
			seen = self.compiler.compiled(site.name)
			for name in set(names) - set(enabled):
				self.compiler.remove(site.name, name, reason="disabled or deleted")
			# Only a row changed since this process compiled it, missing from the state (another process
			# took it out) or invalid: a flood naming unchanged schedules costs these reads, no compile.
			present = self.state.present(site.name, [name for name in names if name in enabled])
			retry = self.state.invalid_names(site.name)
			changed = [
				name
				for name, there in present.items()
				if not there or seen.get(name) != (enabled[name], read.context) or name in retry
			]
			# Which of them the state holds is known from `present`: not the site's whole listing (10,000 names).
			self.compiler.apply(site, read, changed, enabled, {name for name, there in present.items() if there})
			# A reconcile of this site a chunk a hold under way leaves these as this left them (`reconcile_rest`).
			self.touched.get(site.name, set()).update(names)
		except DatabaseError as exc:
			return self.database_down(site, exc)
		return True

	# -- every schedule of a site, for a full reconcile ------------------------------

	def sync_site(self, site_name: str) -> None:
		"""Bring every schedule of one site in line, its invalid rows compiled again (`btu-scheduler resync --site`)."""
		self.compiler.check_generation()
		site = self.compiler.bench.site(site_name)
		try:
			read = read_site(self.database(site), self.compiler.bench, self.compiler.executor, checksum=True)
		except DatabaseError as exc:
			read = exc
		self.reconcile_site(site, read, has_invalid=True)
		self.wake()

	def reconcile_site(
		self,
		site: Site,
		read: SiteRead | None | DatabaseError,
		has_invalid: bool,
		ahead: SiteRows | None = None,
	) -> bool:
		"""Bring every schedule of one site in line with its table, from what `read_sites` read of it: compiled when its
		row changed, removed when disabled or gone. True if it is a BTU site (or has state while its database does
		not answer). `has_invalid`: the site has invalid rows listed, which are compiled again each time (a fix may not
		touch `modified`: a DBA's UPDATE). `ahead`: its rows read before the lock, used if nothing compiled it since.

		Under the lock, but for the read of its rows' versions (10,000 rows take a few tenths of a second), and released
		between chunks of HOLD_CHUNK rows when there are more (`reconcile_rest`): an RPC's edit, and a stop, wait for
		one chunk at most. Waiting edits go first (`ReconcileLock.let_edits_in`)."""
		self.lock.let_edits_in()
		with self.lock:
			try:
				diff = self.begin_site(site, read, has_invalid, ahead)
			except DatabaseError as exc:
				return self.database_down(site, exc)
		if isinstance(diff, bool):
			return diff
		try:
			if diff.enabled is None:
				diff.enabled = self.compiler.row_versions(diff.read, None)
			self.lock.let_edits_in()
			with self.lock:
				if self.diff_site(diff):
					return True
			return self.reconcile_rest(diff)
		except DatabaseError as exc:
			with self.lock:
				return self.database_down(site, exc)
		finally:
			with self.lock:
				self.touched.pop(site.name, None)

	def begin_site(
		self, site: Site, read: SiteRead | None | DatabaseError, has_invalid: bool, ahead: SiteRows | None
	) -> bool | Diff:
		"""`reconcile_site`'s first hold: done when nothing changed (most reconciles: a checksum instead of every row's
		version); else the site's `Diff`, and the runs RPCs bring in line from now on are noted (`touched`)."""
		if isinstance(read, DatabaseError):
			raise read
		if read is None:
			return False
		summary = (read.summary, read.context)
		retry = self.state.invalid_names(site.name) if has_invalid else set()
		if self.compiler.unchanged(site.name, summary) and not retry:
			self.site_answered(site, read.held)
			self.frappe_jobs.took(site, read.scheduled_jobs)
			return True
		if self.compiler.known(site.name):
			ahead = None  # an RPC compiled some of it since it was read ahead: read it again here
		touched = self.touched[site.name] = set()
		versions = ahead.versions if ahead is not None else None
		return Diff(site, read, summary, retry, ahead, versions, self.compiler.resets, touched)

	def diff_site(self, diff: Diff) -> bool:
		"""`reconcile_site`'s second hold: the versions against what this process compiled; the site brought in line if
		that is at most HOLD_CHUNK rows (or it was read ahead), else False: the rest is left to `reconcile_rest`."""
		site, read, touched = diff.site, diff.read, diff.touched
		self.site_answered(site, read.held)
		seen = self.compiler.compiled(site.name)
		in_state = self.state.names(site.name)
		removed = sorted((in_state | set(seen)) - set(diff.enabled) - touched)
		changed = [
			name
			for name, version in diff.enabled.items()
			if name not in touched and (seen.get(name) != (version, read.context) or name in diff.retry)
		]
		if diff.ahead is None and len(removed) + len(changed) > HOLD_CHUNK:
			diff.removed, diff.changed, diff.in_state = removed, changed, in_state
			return False
		for name in removed:
			self.compiler.remove(site.name, name, reason="disabled or deleted")
		if diff.ahead is not None:
			self.compiler.apply_rows(
				site,
				read,
				[row for row in diff.ahead.rows if row.name not in touched],
				diff.ahead.logged,
				diff.enabled,
			)
			self.wake()
		else:
			self.compiler.apply(site, read, changed, diff.enabled)
		self.site_done(diff)
		return True

	def reconcile_rest(self, diff: Diff) -> bool:
		"""The rest of a big site's reconcile: its rows read APPLY_CHUNK at a time without the lock, as a read-ahead
		site's are, and written HOLD_CHUNK a hold of it, removals first. Between two holds an RPC may bring any run in
		line, of this site too; the runs it touched are left as it left them (it read their rows after this read). A
		stop leaves the rest to the next cycle."""
		read = diff.read
		work = [(name, False) for name in diff.removed] + [(name, True) for name in diff.changed]
		try:
			for start in range(0, len(work), APPLY_CHUNK):
				part = work[start : start + APPLY_CHUNK]
				wanted = [name for name, compile in part if compile and name not in diff.touched]
				rows, logged = read_chunk(read, wanted, diff.in_state, self.clock()) if wanted else ([], {})
				for hold in range(0, len(part), HOLD_CHUNK):
					if self.stopping.is_set():
						return True  # the summary is not kept: the next cycle diffs the site again
					self.lock.let_edits_in()
					with self.lock:
						self.apply_hold(diff, part[hold : hold + HOLD_CHUNK], rows, logged)
			self.lock.let_edits_in()
			with self.lock:
				self.site_done(diff)
		finally:
			self.wake()
		return True

	def apply_hold(self, diff: Diff, chunk: list[tuple[str, bool]], rows: list[RunRow], logged: dict[str, str]) -> None:
		"""One hold of `reconcile_rest`: the chunk's removals, then its rows from the part read before, but for the runs
		an RPC touched meanwhile. After a reset (Redis lost the state) the chunk's rows are read again here, so that a
		schedule no longer in the state resumes after its newest logged slot."""
		site, read = diff.site, diff.read
		chunk = [(name, compile) for name, compile in chunk if name not in diff.touched]
		for name, compile in chunk:
			if not compile:
				self.compiler.remove(site.name, name, reason="disabled or deleted")
		names = {name for name, compile in chunk if compile}
		if not names:
			return
		if self.compiler.resets != diff.resets:
			rows, logged = read_chunk(read, sorted(names), self.state.names(site.name), self.clock())
		self.compiler.apply_rows(site, read, [row for row in rows if row.name in names], logged, diff.enabled)

	def site_done(self, diff: Diff) -> None:
		"""The state mirrors the site's table as read: its summary kept, so the next reconcile that reads the same
		checksum reads no row. Not after a reset since its first hold (Redis lost the state, or a resync of everything
		emptied what was compiled): the next cycle compiles the site again."""
		self.compiler.mirrored(diff.site.name, diff.summary, diff.resets)
		self.frappe_jobs.took(diff.site, diff.read.scheduled_jobs)

	def database_down(self, site: Site, exc: DatabaseError) -> bool:
		"""Note the outage (`SiteHealth.database_down`); True if the site has state, which keeps firing meanwhile."""
		if self.site_health.database_down(site.name, exc):
			return site.name in self.state.sites()
		return site.name in self.state.sites() or site.name in self.served

	def site_answered(self, site: Site, held: str | None) -> None:
		"""Note that the site's database answered and whether it is held; a held site's schedules leave the due set."""
		if self.site_health.answered(site.name, held) and self.state.names(site.name):
			self.state.hold_site(site.name)

	# -- a cycle's end ---------------------------------------------------------------

	def keep_served(self, listed: set[str], read: list[str], served: set[str]) -> None:
		"""A cycle read every site (`read`, as the bench listed them when it began; `listed`: as it does now) and found
		`served` to be BTU sites: drop the state of those that are no longer BTU sites of the bench. Under the lock."""
		self.site_health.forget_unlisted(listed)
		self.frappe_jobs.keep(served)
		kept = {name for name in self.site_health.unreadable if site_name_problem(name) is None}
		# A site made after the cycle began (its state came by RPC) was not read in it: the next cycle reads it.
		for gone in self.state.sites() - served - self.site_health.unreachable - kept - (listed - set(read)):
			log_event(logger, logging.INFO, "site_dropped", site=gone, reason="no longer a BTU site of this bench")
			self.state.purge_site(gone)
			self.compiler.forget_site(gone)
		self.served = set(served)

	def firing_sites(self) -> list[str]:
		"""The sites that fire (served, not held), sorted."""
		return sorted(self.served - set(self.site_health.paused))

	def fires(self, site: str) -> bool:
		"""Whether the site fires (served, not held)."""
		return site in self.served and site not in self.site_health.paused

	def firing_members(self, sites: list[str] | None = None) -> list[str]:
		"""The due members of the schedules this process compiled of the sites that fire (served, not held), or of
		those of `sites`."""
		firing = self.firing_sites() if sites is None else sites
		return [due_member(site, name) for site in firing for name in self.compiler.names(site)]
