"""What the RPC listener's commands do to the scheduler.

Any scheduler process may take a command; the effect is the same whichever
does: the schedule is reconciled from its site's database into the shared
Redis state and every process is woken, so the leader uses it at once. A
cancel is no different from a create: a schedule whose row is enabled keeps
firing, one whose row is disabled or gone leaves the state.
"""

from __future__ import annotations

from btu.scheduler_daemon.reads import sources
from btu.scheduler_daemon.reads.bench import BenchError, site_name_problem
from btu.scheduler_daemon.reads.database import DatabaseError
from btu.scheduler_daemon.reconcile.reconciler import Reconciler
from btu.scheduler_daemon.rpc.listener import CommandRejected
from btu.shared import protocol


class RpcDispatcher:
	"""The listener's `Dispatcher` for a scheduler process: checks a command's site and schedules against
	the bench and its databases, then has the reconciler sync them."""

	def __init__(self, reconciler: Reconciler):
		self.reconciler = reconciler

	def resolve_site(self, site: str | None) -> str:
		"""The site named, else the bench's default site, else its only BTU site; raises CommandRejected."""
		bench = self.reconciler.snapshot().bench
		names = bench.site_names()
		if site:
			if site not in names:
				raise CommandRejected(f"site {site!r} is not a site of this bench; sites: {', '.join(names) or 'none'}")
			return site
		default = bench.default_site
		if default and default in names:
			return default
		btu_sites = self.btu_sites()
		if len(btu_sites) == 1:
			return btu_sites[0]
		raise CommandRejected(
			f'no "site" field and this bench has {len(btu_sites)} BTU sites ({", ".join(btu_sites) or "none"}) '
			'and no default_site: add "site" to the command'
		)

	def btu_sites(self) -> list[str]:
		"""Sites of the bench whose database has the BTU tables (by the state when a database is down)."""
		reconciler = self.reconciler
		sites = []
		known = reconciler.state.sites()
		bench = reconciler.snapshot().bench
		for name in bench.site_names():
			try:
				if reconciler.database(bench.site(name)).has_btu_tables():
					sites.append(name)
			except (DatabaseError, BenchError):
				if name in known:
					sites.append(name)
		return sites

	def check_targets(self, site: str, request_type: str, names: list[str]) -> dict[str, str]:
		"""The names that are not schedules of `site`, each with why it is refused. When the database does not
		answer, none: the sync after the ACK tells."""
		problem = site_name_problem(site)
		if problem:
			return dict.fromkeys(names, problem)
		unknown = names
		if request_type == protocol.CANCEL_TASK_SCHEDULE:
			# A cancel may name a row deleted already: still in the state, the sync takes it out.
			unknown = [name for name, there in self.reconciler.state.present(site, names).items() if not there]
		if not unknown:
			return {}
		try:
			existing = sources.existing(self.reconciler.database(self.reconciler.snapshot().bench.site(site)), unknown)
		except (DatabaseError, BenchError):
			return {}  # cannot tell now; the reconcile retries once the database answers
		return {
			name: f"request_content {name!r}: site {site} has no BTU Task Schedule of that name"
			for name in unknown
			if name not in existing
		}

	def execute(self, site: str, names: list[str]) -> None:
		"""Sync these schedules of `site` with their rows (`Reconciler.sync`)."""
		# create and cancel alike: the row decides, so a forged cancel cannot silence an enabled schedule.
		self.reconciler.sync(site, names)
