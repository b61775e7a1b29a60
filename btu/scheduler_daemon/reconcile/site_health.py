"""What keeps a bench's sites from being read or from firing, as the reconciles last saw it.

A site is held (its config pauses it, or BTU Configuration disables it), its database unreachable, or
its site_config.json unreadable (or its name refused). Each change is logged once, when it begins and
when it ends; `status` and the Desk show the current ones.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

from btu.scheduler_daemon.log import log_event
from btu.scheduler_daemon.operations.metrics import Metrics
from btu.scheduler_daemon.reads.bench import Bench, BenchError, Site, SiteMissing, site_name_problem
from btu.scheduler_daemon.reads.database import DatabaseBusy, DatabaseError

logger = logging.getLogger("btu.scheduler.reconcile")


@dataclass(frozen=True)
class Health:
	"""What keeps sites from being read or from firing, as the reconciler last saw it."""

	paused: dict[str, str]  # site -> why its schedules do not fire (site_config pause, BTU Configuration)
	unreachable: frozenset[str]  # sites whose database does not answer
	unreadable: dict[str, str]  # site -> why its site_config.json cannot be read, or its name is refused


class SiteHealth:
	def __init__(self, metrics: Metrics):
		self.metrics = metrics
		self.paused: dict[str, str] = {}  # held sites -> why
		self.unreachable: set[str] = set()  # sites whose database does not answer
		self.unreadable: dict[str, str] = {}  # sites whose site_config.json cannot be read -> why

	def snapshot(self) -> Health:
		# Copies taken without the reconciler's lock: a status must not wait for a reconcile.
		return Health(
			paused=dict(self.paused), unreachable=frozenset(self.unreachable), unreadable=dict(self.unreadable)
		)

	def readable(self, bench: Bench, names: list[str]) -> list[Site]:
		"""Those of the sites `names` whose site_config.json reads; the others are noted as unreadable. A site whose
		directory went since it was listed is passed over."""
		sites = []
		for name in names:
			try:
				sites.append(bench.site(name))
			except SiteMissing:
				continue
			except BenchError as exc:
				# Shown in the status like an unreachable database. An unreadable config keeps the site firing
				# from the Redis state; a refused name never fires, and its state is dropped at the cycle's end.
				refused = site_name_problem(name) is not None
				if self.unreadable.get(name) != str(exc):
					log_event(
						logger,
						logging.ERROR,
						"site_refused" if refused else "site_unreadable",
						site=name,
						error=str(exc),
						effect="its schedules never fire" if refused else "firing continues from the Redis state",
					)
				self.unreadable[name] = str(exc)
				continue
			if self.unreadable.pop(name, None):
				log_event(logger, logging.INFO, "site_readable", site=name)
		return sites

	def forget_unlisted(self, listed: set[str]) -> None:
		for gone in set(self.unreadable) - listed:
			del self.unreadable[gone]

	def database_down(self, site: str, exc: DatabaseError) -> bool:
		"""Note a failed read (logged once, counted each time); False when the site only waited too long for a
		connection (DatabaseBusy): logged, not marked unreachable."""
		if isinstance(exc, DatabaseBusy):
			log_event(
				logger,
				logging.WARNING,
				"database_busy",
				site=site,
				error=str(exc),
				effect="read again at the next reconcile",
			)
			return False
		self.metrics.database_error(site)
		if site not in self.unreachable:
			log_event(
				logger,
				logging.ERROR,
				"database_unreachable",
				site=site,
				error=str(exc),
				effect="firing continues from the Redis state",
			)
		self.unreachable.add(site)
		return True

	def answered(self, site: str, held: str | None) -> bool:
		"""Note that the site's database answered and whether the site is held (`held`: why), logging each change;
		True when it is held."""
		if site in self.unreachable:
			self.unreachable.discard(site)
			log_event(logger, logging.INFO, "database_restored", site=site)
		was_held = self.paused.pop(site, None)
		if held:
			self.paused[site] = held
			if held != was_held:
				log_event(
					logger,
					logging.WARNING,
					"site_held",
					site=site,
					reason=held,
					effect="its schedules do not fire; their cursors are kept",
				)
			return True
		if was_held:
			log_event(logger, logging.INFO, "site_resumed", site=site, reason=f"no longer held ({was_held})")
		return False
