"""The cycles of a full reconcile: every site of the bench read once per `full_refresh_interval_secs`, a slice a tick
(`stagger`), or all at once (`full`: at start, on election, when Redis lost the state). A cycle's start loads the bench
and sees whether Redis lost the state; its end drops the state of sites that are no longer BTU sites; every
AUDIT_EVERY-th audits the state. Each site is brought in line by `site_sync.py`.
"""

from __future__ import annotations

import logging
import math
import time
from dataclasses import dataclass, field
from pathlib import Path

from btu.scheduler_daemon.log import log_event
from btu.scheduler_daemon.operations.metrics import Metrics
from btu.scheduler_daemon.reads.bench import Bench, BenchError
from btu.scheduler_daemon.reads.connections import Connections
from btu.scheduler_daemon.reads.server_read import reader_for
from btu.scheduler_daemon.reads.site_reader import read_sites
from btu.scheduler_daemon.reconcile.site_compiler import SiteCompiler
from btu.scheduler_daemon.reconcile.site_rows import read_ahead
from btu.scheduler_daemon.reconcile.site_sync import SiteSync
from btu.scheduler_daemon.store.state import AUDIT_CHUNK, State

logger = logging.getLogger("btu.scheduler.reconcile")
# Slices of a staggered cycle come at least this far apart (or the interval, when shorter): a bench of a few sites
# reads one site a tick, and a slice's own cost (a query through the reader, a Redis round trip) is paid 12 times a
# minute, not 60: at a thousand sites those were half of an idle leader's CPU.
MIN_TICK_SECS = 5.0


@dataclass
class Cycle:
	"""One pass over a bench's sites, each read once: all at once (`ReconcileCycles.full`) or a slice a tick."""

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


class ReconcileCycles:
	"""Runs the cycles over a bench's sites: `cycle` is the one under way (or the last); `cycles_done` counts them."""

	def __init__(
		self,
		bench_path: str | Path,
		site_sync: SiteSync,
		compiler: SiteCompiler,
		state: State,
		connections: Connections,
		metrics: Metrics,
		audit_secs: float,
	):
		self.bench_path = bench_path
		self.site_sync = site_sync
		self.compiler = compiler
		self.state = state
		self.connections = connections
		self.metrics = metrics
		# Many sites a query, when the bench has one.
		self.reader = reader_for(compiler.bench.common_config, connections, None)
		self.cycle = Cycle()
		self.cycles_done = 0  # the engine publishes the status when a cycle ends
		self.audit_secs = audit_secs
		self.next_audit = time.monotonic() + audit_secs

	def full(self) -> None:
		"""Reconcile every site of the bench now (at start, when elected, after Redis lost the state).

		Each site's settings and checksum are read first, side by side on the database servers' connections and
		without the lock; only then is each site brought in line, one at a time under the lock (a big site a chunk a
		hold: `SiteSync.reconcile_rest`), so that an RPC's edit waits for one chunk of a site at most, never for the
		whole pass."""
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
		with self.site_sync.lock:
			try:
				self.compiler.bench = bench = Bench.load(self.bench_path)
			except BenchError as exc:
				log_event(logger, logging.ERROR, "bench_unreadable", error=str(exc))
				return False
			self.reader = reader_for(bench.common_config, self.connections, self.reader)
			self.compiler.check_generation()
			audit = time.monotonic() >= self.next_audit
		if audit:
			# Before the sites, so that what it moved aside is rebuilt by this cycle.
			self.audit()
		with self.site_sync.lock:
			self.compiler.forget_resynced()
			self.cycle = Cycle(bench.site_names())
		return True

	def reconcile_sites(self, names: list[str]) -> bool:
		"""Bring these sites in line; only a compile wakes the leader (`SiteCompiler.apply`): a slice that changed
		nothing costs it nothing. False when the process began to stop meanwhile: the rest is left, and the cycle is not
		ended (it would drop the sites it did not read), so a stop waits for one chunk of a site at most, never for a
		slice."""
		bench, stopping = self.compiler.bench, self.site_sync.stopping
		sites = self.site_sync.site_health.readable(bench, names)
		reads = read_sites(
			[self.site_sync.database(site) for site in sites],
			bench,
			self.compiler.executor,
			self.connections.limit,
			self.reader,
			stopping,
		)
		with_invalid = self.state.sites_with_invalid([site.name for site in sites])
		ahead = read_ahead(sites, reads, self.compiler.cold, self.compiler.rows_ahead, self.connections.limit)
		try:
			for site, rows in ahead:
				if stopping.is_set():
					return False
				if self.site_sync.reconcile_site(site, reads[site.name], site.name in with_invalid, rows):
					self.cycle.served.add(site.name)
		finally:
			ahead.close()
		return not stopping.is_set()

	def end_cycle(self) -> None:
		"""Every site was read: drop the state of those that are no longer BTU sites of the bench."""
		with self.site_sync.lock:
			self.site_sync.keep_served(set(self.compiler.bench.site_names()), self.cycle.sites, self.cycle.served)
			self.cycles_done += 1
		self.connections.close_idle()
		self.compiler.wake()

	def audit(self) -> None:
		"""Mend the state of every firing site's schedules (State.audit), logging what was wrong. A chunk of a site's
		schedules a hold of the lock, letting waiting edits in between: in one hold, the audit of a million schedules
		held an RPC's edit for about 6 s (`scripts/benchmark scale`, 100 sites x 10,000 at a 1 s refresh)."""
		self.next_audit = time.monotonic() + self.audit_secs
		with self.site_sync.lock:
			moved_keys = self.state.check_types(self.state.sites())
			sites = self.site_sync.firing_sites()
			mended, moved = self.state.audit([]) if not sites else (0, 0)  # the prepared set's junk goes all the same
		for site in sites:
			site_mended, site_moved = self.audit_site(site)
			mended, moved = mended + site_mended, moved + site_moved
		if moved:
			self.metrics.quarantine("schedule_state", moved)
		log_mended(mended, moved, moved_keys)

	def audit_site(self, site: str) -> tuple[int, int]:
		"""One site's audit, AUDIT_CHUNK schedules a hold of the lock; it ends early when the site stops firing (held
		or dropped: its members would be stale) or the process stops (a stop waits for one chunk at most)."""
		lock = self.site_sync.lock
		lock.let_edits_in()
		with lock:
			members = self.site_sync.firing_members([site])
		mended = moved = 0
		for start in range(0, len(members), AUDIT_CHUNK):
			if self.site_sync.stopping.is_set():
				break
			lock.let_edits_in()
			with lock:
				if not self.site_sync.fires(site):
					break
				chunk_mended, chunk_moved = self.state.audit(members[start : start + AUDIT_CHUNK])
			mended, moved = mended + chunk_mended, moved + chunk_moved
		return mended, moved


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
