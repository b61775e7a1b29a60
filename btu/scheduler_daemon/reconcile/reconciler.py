"""Bringing the Redis state in line with the sites' databases.

The databases are the source of truth. A reconcile reads, per site, a cheap
list of (schedule, modified, task modified) and compiles only the rows that
changed since it last looked; a full one also drops schedules, sites and
rows that are gone. It runs at start, every `full_refresh_interval_secs`, and
at once for the schedule an RPC command names. When Redis lost its data (the
state's generation changed) everything is compiled again, and a schedule with
Task Logs resumes after its newest logged slot, so the catch-up policy decides
what the outage cost.

This module is the reconciler's front, built from its parts: the pure compile of a row (`row_compile.py`), what a
site's rows compile to and what was compiled (`site_compiler.py`), a site brought in line under the reconcile lock
(`site_sync.py`) and the cycles over the bench's sites (`reconcile_cycle.py`). The SQL is in `database.py`, the
Redis writes in `state.py`.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass
from pathlib import Path

from btu.scheduler_daemon.operations.metrics import Metrics
from btu.scheduler_daemon.reads.bench import Bench, Site
from btu.scheduler_daemon.reads.connections import Connections
from btu.scheduler_daemon.reads.database import SiteDatabase, connect
from btu.scheduler_daemon.reconcile.cycles import ReconcileCycles
from btu.scheduler_daemon.reconcile.frappe_job_sites import FrappeJobSites
from btu.scheduler_daemon.reconcile.site_compiler import SiteCompiler
from btu.scheduler_daemon.reconcile.site_health import Health, SiteHealth
from btu.scheduler_daemon.reconcile.site_sync import SiteSync
from btu.scheduler_daemon.store.state import State

# Every this many full reconciles, one also audits the state (State.audit): a wrong value that no
# fire reads (a due entry at the wrong time, a schedule gone from the due set) is mended within
# this many full_refresh_interval_secs (5 minutes by default).
AUDIT_EVERY = 5


@dataclass(frozen=True)
class ReconcileView:
	"""What the engine reads of the reconciler: the bench as last loaded, the cycles ended, the sites of the cycle."""

	bench: Bench
	cycles_done: int
	cycle_sites: int


class Reconciler:
	"""Keeps the Redis state of a bench's BTU sites in line with their databases.

	`full` reconciles every site, `stagger` a slice of them, `sync` some schedules of one site (RPC commands, resync)
	and `sync_site` every schedule of one; `health` says which sites are held, unreachable or unreadable; `snapshot`
	is the rest the engine reads. `frappe_jobs`: whose Scheduled Job Types the reconciles leave to BTU."""

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
		frappe_jobs: FrappeJobSites | None = None,
	):
		connections = connections or Connections(connect)
		metrics = metrics or Metrics()
		self.state = state
		self.site_health = SiteHealth(metrics)
		self.compiler = SiteCompiler(Bench.load(bench_path), state, executor, clock, wake)
		self.site_sync = SiteSync(
			self.compiler,
			state,
			clock,
			wake,
			self.site_health,
			frappe_jobs or FrappeJobSites(state.keys),
			connections,
			metrics,
		)
		self.cycles = ReconcileCycles(
			bench_path, self.site_sync, self.compiler, state, connections, metrics, audit_secs
		)

	def full(self) -> None:
		"""Every site of the bench now (`ReconcileCycles.full`)."""
		self.cycles.full()

	def stagger(self, interval: float) -> float:
		"""The next slice of a cycle over `interval` seconds; the seconds until the next (`ReconcileCycles.stagger`)."""
		return self.cycles.stagger(interval)

	def sync(self, site_name: str, names: list[str]) -> None:
		"""These schedules of the site brought in line with their rows (`SiteSync.sync_schedules`)."""
		self.site_sync.sync_schedules(site_name, names)

	def sync_site(self, site_name: str) -> None:
		"""Every schedule of the site brought in line, its invalid rows compiled again (`SiteSync.sync_site`)."""
		self.site_sync.sync_site(site_name)

	def health(self) -> Health:
		"""Which sites are held, unreachable or unreadable, as the last reconcile left them."""
		return self.site_health.snapshot()

	def snapshot(self) -> ReconcileView:
		"""The bench, the cycles ended and the current cycle's sites, as they are now."""
		return ReconcileView(self.compiler.bench, self.cycles.cycles_done, len(self.cycles.cycle.sites))

	def database(self, site: Site) -> SiteDatabase:
		"""The site's reads, as the reconciler makes them (`SiteSync.database`)."""
		return self.site_sync.database(site)

	def stop_with(self, stopping: threading.Event) -> None:
		"""The process's stop: a reconcile under way gives up when it is set."""
		self.site_sync.stopping = stopping
