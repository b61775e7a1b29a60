"""Bringing the Redis state in line with the sites' databases.

The databases are the source of truth. A reconcile reads, per site, a cheap
list of (schedule, modified, task modified) and compiles only the rows that
changed since it last looked; a full one also drops schedules, sites and
rows that are gone. It runs at start, every `full_refresh_interval_secs`, and
at once for the schedule an RPC command names. When Redis lost its data (the
state's generation changed) everything is compiled again, and a schedule with
Task Logs resumes after its newest logged slot, so the catch-up policy decides
what the outage cost.

This module diffs and compiles; the SQL it needs is in `database.py`, the
Redis writes in `state.py`.
"""

from __future__ import annotations

import logging
import math
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

from btu.scheduler_daemon import sources
from btu.scheduler_daemon.bench import Bench, BenchError, Site, site_name_problem
from btu.scheduler_daemon.connections import Connections
from btu.scheduler_daemon.database import DatabaseError, SiteDatabase, connect
from btu.scheduler_daemon.log import log_event
from btu.scheduler_daemon.metrics import Metrics
from btu.scheduler_daemon.row_compile import compile_row, compiled, first_cursors, row_problem
from btu.scheduler_daemon.server_read import reader_for
from btu.scheduler_daemon.site_health import Health, SiteHealth
from btu.scheduler_daemon.site_read import SiteRead, read_site, read_sites
from btu.scheduler_daemon.site_reconcile import ReconcileLock, SiteReconcile
from btu.scheduler_daemon.site_rows import APPLY_CHUNK, read_ahead, read_chunk
from btu.scheduler_daemon.state import CompiledSchedule, State
from btu.shared import protocol
from btu.shared.instants import from_ms, slot_text
from btu.shared.run_kind import RESERVED_STARTS
from btu.shared.schedule import ScheduleSpec

logger = logging.getLogger("btu.scheduler.reconcile")
# Every this many full reconciles, one also audits the state (State.audit): a wrong value that no
# fire reads (a due entry at the wrong time, a schedule gone from the due set) is mended within
# this many full_refresh_interval_secs (5 minutes by default).
AUDIT_EVERY = 5
# Slices of a staggered cycle come at least this far apart (or the interval, when shorter): a bench of a few sites
# reads one site a tick, and a slice's own cost (a query through the reader, a Redis round trip) is paid 12 times a
# minute, not 60: at a thousand sites those were half of an idle leader's CPU.
MIN_TICK_SECS = 5.0


@dataclass
class Cycle:
	"""One pass over a bench's sites, each read once: all at once by `Reconciler.full`, a slice a tick by `stagger`."""

	sites: list[str] = field(default_factory=list)  # as listed when it began
	rotation: list[str] = field(init=False)  # not read yet
	served: set[str] = field(default_factory=set)  # found to be BTU sites (or with state while their database is down)

	def __post_init__(self):
		self.rotation = list(self.sites)

	def next_slice(self, interval: float) -> tuple[list[str], float]:
		"""The sites of the next tick, and the tick: at least MIN_TICK_SECS (or `interval`), so that each site is read
		once per `interval`."""
		tick = max(min(MIN_TICK_SECS, interval), interval / max(len(self.sites), 1))
		size = max(1, math.ceil(len(self.sites) * tick / interval))
		names, self.rotation = self.rotation[:size], self.rotation[size:]
		return names, tick


class FrappeJobSites:
	"""The sites whose Frappe Scheduled Job Types the state holds, by the reconciles: the leader acknowledges firing
	them (`acks`, `protocol.frappe_jobs_ack_key`), and Frappe's tick stands back for those only."""

	def __init__(self):
		# Site -> the bench id Frappe computes inside it, which names its acknowledgement key.
		self.bench_ids: dict[str, str] = {}

	def took(self, site: Site, on: bool) -> None:
		"""A full reconcile of the site left its Scheduled Job Types in the state (`on`) or took them out."""
		if on:
			self.bench_ids[site.name] = site.bench_id
		else:
			self.bench_ids.pop(site.name, None)

	def read_for_schedules(self, site: str, on: bool) -> None:
		"""An RPC's reconcile read the site: switched off, they are handed back at once; switched on, they are taken
		only by a full reconcile, which compiles every job type first (an RPC may name one schedule only)."""
		if not on:
			self.bench_ids.pop(site, None)

	def keep(self, served: set[str]) -> None:
		"""Forget the sites that are no longer BTU sites of the bench."""
		for gone in set(self.bench_ids) - served:
			del self.bench_ids[gone]

	def acks(self, health: Health) -> frozenset[str]:
		"""The acknowledgement keys of the sites whose Scheduled Job Types fire now: taken, and by `health` not held,
		database answering, config readable."""
		# A copy: the reconciler's threads change it while a heartbeat reads it.
		sites = dict(self.bench_ids)
		left_out = set(health.paused) | health.unreachable | set(health.unreadable)
		return frozenset(
			protocol.frappe_jobs_ack_key(bench_id, site) for site, bench_id in sites.items() if site not in left_out
		)


class Reconciler(SiteReconcile):
	"""Keeps the Redis state of a bench's BTU sites in line with their databases.

	`full` reconciles every site, `sync_schedules` some schedules of one site (RPC commands, resync);
	`health` says which sites are held, unreachable or unreadable. `bench` is the bench as last loaded."""

	def __init__(
		self,
		bench_path: str | Path,
		state: State,
		executor: str,
		clock,
		wake,
		audit_secs: float = 300.0,
		metrics: Metrics | None = None,
		connections: Connections | None = None,
	):
		self.bench_path = bench_path
		self.connections = connections or Connections(connect)
		self.metrics = metrics or Metrics()
		self.state = state
		self.executor = executor
		self.clock = clock  # callable returning Redis's now as an aware datetime
		self.wake = wake  # callable telling every process the state changed
		self.bench = Bench.load(bench_path)
		self.databases: dict[str, SiteDatabase] = {}
		# Many sites a query, when the bench has one.
		self.reader = reader_for(self.bench.common_config, self.connections, None)
		# site -> schedule -> (row version, site context) compiled
		self.seen: dict[str, dict[str, tuple[str, str]]] = {}
		self.summaries: dict[str, tuple] = {}  # site -> (table summary, site context) at its last full reconcile
		self.generation: str | None = None
		self.site_health = SiteHealth(self.metrics)
		self.served: set[str] = set()  # BTU sites at the end of the last cycle
		self.cycle = Cycle()
		self.cycles_done = 0  # the engine publishes the status when a cycle ends
		self.frappe_jobs = FrappeJobSites()
		self.refused_names: set[tuple[str, str]] = set()  # (site, schedule) named like another kind's run, logged once
		# Held to diff and write the state: by the reconcile thread a site (a chunk of a big site: `Diff`) a hold, by
		# an RPC for its whole edit. Every write of a compiled row is made in the hold that read the row.
		self.lock = ReconcileLock()
		self.resets = 0  # `seen` emptied (Redis lost the state, a resync of everything)
		# site being reconciled a chunk a hold -> the runs RPCs brought in line meanwhile
		self.touched: dict[str, set[str]] = {}
		self.stopping = threading.Event()  # the process's stop (`Scheduler.run`): a reconcile under way gives up
		self.audit_secs = audit_secs
		self.next_audit = time.monotonic() + audit_secs

	def database(self, site: Site) -> SiteDatabase:
		"""The site's reads, made anew when its site_config.json changed."""
		db = self.databases.get(site.name)
		if db is None or db.site.config != site.config:
			db = self.databases[site.name] = SiteDatabase(site, self.connections)
		return db

	def health(self) -> Health:
		"""Which sites are held, unreachable or unreadable, as the last reconcile left them."""
		return self.site_health.snapshot()

	def check_generation(self) -> None:
		"""After Redis lost the state (its generation changed), compile every schedule again."""
		generation = self.state.generation()
		if generation != self.generation:
			if self.generation is not None:
				log_event(
					logger,
					logging.WARNING,
					"state_rebuild",
					reason="Redis lost the scheduler state; rebuilding from the databases",
				)
			self.generation = generation
			self.seen.clear()
			self.summaries.clear()
			self.resets += 1

	def forget_resynced(self) -> None:
		"""Schedules whose state was quarantined are compiled again from their rows ("*": all of them,
		"<site>|*": all of a site's)."""
		for member in self.state.take_resync():
			if member == protocol.RESYNC_ALL:
				self.seen.clear()
				self.summaries.clear()
				self.resets += 1
				continue
			site, name = protocol.parse_due_member(member)
			if name == protocol.RESYNC_ALL:
				self.seen.pop(site, None)
			else:
				self.seen.get(site, {}).pop(name, None)
			self.summaries.pop(site, None)

	# -- full reconcile ---------------------------------------------------------

	def full(self) -> None:
		"""Reconcile every site of the bench now (at start, when elected, after Redis lost the state).

		Each site's settings and checksum are read first, side by side on the database servers' connections and
		without the lock; only then is each site brought in line, one at a time under the lock (a big site a chunk a
		hold: `reconcile_rest`), so that an RPC's edit waits for one chunk of a site at most, never for the whole
		pass."""
		with self.metrics.reconcile_timer("full"):
			if self.begin_cycle():
				names, self.cycle.rotation = self.cycle.rotation, []
				if self.reconcile_sites(names):
					self.end_cycle()

	def stagger(self, interval: float) -> float:
		"""One slice of a cycle that reads every site once per `interval` seconds: the sites of one tick (at least
		MIN_TICK_SECS apart), so that no pass is long and the databases see a steady trickle rather than a burst.
		Returns the seconds until the next slice is due."""
		with self.metrics.reconcile_timer("slice"):
			if not self.cycle.rotation and not self.begin_cycle():
				return interval
			names, tick = self.cycle.next_slice(interval)
			if self.reconcile_sites(names) and not self.cycle.rotation:
				self.end_cycle()
			return tick

	def begin_cycle(self) -> bool:
		"""Load the bench, see whether Redis lost the state, audit when due, and list the sites this cycle reads."""
		with self.lock:
			try:
				self.bench = Bench.load(self.bench_path)
			except BenchError as exc:
				log_event(logger, logging.ERROR, "bench_unreadable", error=str(exc))
				return False
			self.reader = reader_for(self.bench.common_config, self.connections, self.reader)
			self.check_generation()
			if time.monotonic() >= self.next_audit:
				self.audit()  # before the sites, so that what it moved aside is rebuilt by this cycle
			self.forget_resynced()
			self.cycle = Cycle(self.bench.site_names())
		return True

	def reconcile_sites(self, names: list[str]) -> bool:
		"""Bring these sites in line; only a compile wakes the leader (`apply`): a slice that changed nothing costs it
		nothing. False when the process began to stop meanwhile: the rest is left, and the cycle is not ended (it would
		drop the sites it did not read), so a stop waits for one chunk of a site at most, never for a slice."""
		sites = self.site_health.readable(self.bench, names)
		reads = read_sites(
			[self.database(site) for site in sites],
			self.bench,
			self.executor,
			self.connections.limit,
			self.reader,
			self.stopping,
		)
		with_invalid = self.state.sites_with_invalid([site.name for site in sites])
		ahead = read_ahead(self, sites, reads)
		try:
			for site, rows in ahead:
				if self.stopping.is_set():
					return False
				if self.reconcile_site(site, reads[site.name], site.name in with_invalid, rows):
					self.cycle.served.add(site.name)
		finally:
			ahead.close()
		return not self.stopping.is_set()

	def end_cycle(self) -> None:
		"""Every site was read: drop the state of those that are no longer BTU sites of the bench."""
		with self.lock:
			listed = set(self.bench.site_names())
			self.site_health.forget_unlisted(listed)
			served = self.cycle.served
			self.frappe_jobs.keep(served)
			kept = {name for name in self.site_health.unreadable if site_name_problem(name) is None}
			# A site made after the cycle began (its state came by RPC) was not read in it: the next cycle reads it.
			for gone in (
				self.state.sites() - served - self.site_health.unreachable - kept - (listed - set(self.cycle.sites))
			):
				log_event(logger, logging.INFO, "site_dropped", site=gone, reason="no longer a BTU site of this bench")
				self.state.purge_site(gone)
				self.seen.pop(gone, None)
				self.summaries.pop(gone, None)
			self.served = set(served)
			self.cycles_done += 1
		self.connections.close_idle()
		self.wake()

	def audit(self) -> None:
		"""Mend the state of every firing site's schedules (State.audit), logging what was wrong."""
		self.next_audit = time.monotonic() + self.audit_secs
		moved_keys = self.state.check_types(self.state.sites())
		firing = sorted(self.served - set(self.site_health.paused))
		members = [protocol.due_member(site, name) for site in firing for name in sorted(self.seen.get(site, {}))]
		mended, moved = self.state.audit(members)
		if moved:
			self.metrics.quarantine("schedule_state", moved)
		log_mended(mended, moved, moved_keys)

	# -- some schedules, for RPC commands ------------------------------------------

	def sync_schedules(self, site_name: str, names: list[str]) -> None:
		"""Bring these schedules in line with their rows: kept or updated if enabled, removed if disabled or gone."""
		with self.lock.edit(), self.metrics.reconcile_timer("schedules"):
			self.check_generation()
			self.reconcile_schedules(self.bench.site(site_name), names)
			self.wake()

	def reconcile_schedules(self, site: Site, names: list[str]) -> bool:
		"""Like `reconcile_site` for these schedules of the site only."""
		db = self.database(site)
		try:
			read = read_site(db, self.bench, self.executor, checksum=False)
			if read is None:
				return False
			enabled = self.row_versions(read, names)
			self.site_answered(site, read.held)
			self.frappe_jobs.read_for_schedules(site.name, read.scheduled_jobs)
			seen = self.seen.setdefault(site.name, {})
			for name in set(names) - set(enabled):
				self.remove(site.name, name, reason="disabled or deleted")
			# Only a row changed since this process compiled it, missing from the state (another process
			# took it out) or invalid: a flood naming unchanged schedules costs these reads, no compile.
			present = self.state.present(site.name, [name for name in names if name in enabled])
			retry = self.state.invalid_names(site.name)
			changed = [
				name
				for name, there in present.items()
				if not there or seen.get(name) != (enabled[name], read.context) or name in retry
			]
			self.apply(site, read, changed, enabled)
			# A reconcile of this site a chunk a hold under way leaves these as this left them (`reconcile_rest`).
			self.touched.get(site.name, set()).update(names)
		except DatabaseError as exc:
			return self.database_down(site, exc)
		return True

	# -- steps of both ------------------------------------------------------------

	def row_versions(self, read: SiteRead, names: list[str] | None) -> dict[str, str]:
		"""Enabled run (of those named by their key texts; all when `names` is None) -> its version, which changes with
		its row or task: schedules, pending run requests and the Scheduled Job Types BTU fires (`sources.versions`)."""
		versions, refused = sources.versions(read, names)
		log_refused(read.db.site.name, refused, self.refused_names)
		return versions

	def database_down(self, site: Site, exc: DatabaseError) -> bool:
		"""Note the outage (`SiteHealth.database_down`); True if the site has state, which keeps firing meanwhile."""
		if self.site_health.database_down(site.name, exc):
			return site.name in self.state.sites()
		return site.name in self.state.sites() or site.name in self.served

	def site_answered(self, site: Site, held: str | None) -> None:
		"""Note that the site's database answered and whether it is held; a held site's schedules leave the due set."""
		if self.site_health.answered(site.name, held) and self.state.names(site.name):
			self.state.hold_site(site.name)

	def apply(self, site: Site, read: SiteRead, names: list[str], versions: dict[str, str]) -> None:
		"""Compile these schedules from their rows into the state; `versions` are those `row_versions` read."""
		if not names:
			return
		# In chunks (APPLY_CHUNK): a site with 100k schedules costs the memory of one chunk, not of all its rows.
		in_state = self.state.names(site.name)
		for start in range(0, len(names), APPLY_CHUNK):
			chunk = names[start : start + APPLY_CHUNK]
			self.apply_rows(site, read, *read_chunk(read, chunk, in_state, self.clock()), versions)
		self.wake()

	def apply_rows(
		self, site: Site, read: SiteRead, rows: list[dict], logged: dict[str, str], versions: dict[str, str]
	) -> None:
		"""Compile these rows into the state; a row that cannot be scheduled leaves it and is listed as invalid.
		`logged`: schedule -> its newest logged slot, for those new to the state."""
		now = self.clock()
		invalid: dict[str, str] = {}
		upserts: list[CompiledSchedule] = []
		specs: dict[str, ScheduleSpec] = {}
		seen = self.seen.setdefault(site.name, {})
		for row in rows:
			name = row["name"]
			seen[name] = (versions[name], read.context)
			try:
				spec, template = compile_row(row, self.bench, self.executor, read.system_tz, site)
				cursor_if_new, cursor_if_changed = first_cursors(row, spec, logged.get(name), read.system_tz, now)
			except Exception as exc:  # one row must never stop the rest of its site, nor the sites after it
				invalid[name] = row_problem(exc)
				log_event(logger, logging.ERROR, "invalid_schedule", site=site.name, schedule=name, error=invalid[name])
				self.state.remove(site.name, name)
				continue
			specs[name] = spec
			upserts.append(compiled(row, spec, template, cursor_if_new, cursor_if_changed, active=not read.held))
		log_applied(site.name, upserts, self.state.upsert_many(site.name, upserts), specs)
		if invalid:
			self.state.set_invalid(site.name, invalid, replace=False)

	def remove(self, site: str, name: str, reason: str) -> None:
		"""Take one schedule out of the state (logged when it was there) and forget that it was compiled."""
		if self.state.remove(site, name):
			log_event(logger, logging.INFO, "schedule_removed", site=site, schedule=name, reason=reason)
		self.state.clear_invalid(site, name)
		self.seen.get(site, {}).pop(name, None)
		self.summaries.pop(site, None)  # the state no longer mirrors the table: diff it next time


def log_mended(mended: int, moved: int, moved_keys: list[str]) -> None:
	"""One line when an audit found anything wrong: due entries put right, states and keys moved aside."""
	if mended or moved or moved_keys:
		log_event(
			logger,
			logging.WARNING,
			"state_mended",
			due_entries=mended,
			states_moved_aside=moved,
			keys_moved_aside=",".join(moved_keys),
			effect="due entries put right; what was moved aside is rebuilt from the database rows",
		)


def log_refused(site: str, names: list[str], logged: set[tuple[str, str]]) -> None:
	"""Schedules left out for a name that reads as another kind's run (the Desk refuses such a name on save; SQL may
	write one), logged once per process: `logged` remembers them."""
	for name in names:
		if (site, name) not in logged:
			logged.add((site, name))
			log_event(
				logger,
				logging.ERROR,
				"invalid_schedule",
				site=site,
				schedule=name,
				error=(
					f"a schedule's name may not start with {' or '.join(map(repr, RESERVED_STARTS))}, "
					"which name run requests' and Scheduled Job Types' states; rename it"
				),
			)


def log_applied(site: str, upserts: list[CompiledSchedule], results: list[str], specs: dict[str, ScheduleSpec]) -> None:
	"""One line per schedule that `State.upsert_many` added or changed (`results`, in the order of `upserts`)."""
	if not logger.isEnabledFor(logging.INFO):
		return
	for entry, result in zip(upserts, results):
		if result != "same":
			cursor = entry.cursor_if_new if result in ("new", "rebuilt") else entry.cursor_if_changed
			log_event(
				logger,
				logging.INFO,
				"schedule_" + result,
				site=site,
				schedule=entry.name,
				slot=slot_text(from_ms(cursor)) if cursor else None,
				description=specs[entry.name].describe(),
			)
