"""Which sites' Frappe Scheduled Job Types the leader fires, as the reconciles found them: the engine's heartbeat
acknowledges those sites (`Keys.frappe_jobs_ack_key`), and Frappe's own tick stands back for them only."""

from __future__ import annotations

from btu.scheduler_daemon.reads.bench import Site
from btu.scheduler_daemon.reconcile.site_health import Health
from btu.shared.keys import Keys


class FrappeJobSites:
	"""The sites whose Frappe Scheduled Job Types the state holds, by the reconciles: the leader acknowledges firing
	them (`acks`, `Keys.frappe_jobs_ack_key`), and Frappe's tick stands back for those only."""

	def __init__(self, keys: Keys):
		self.keys = keys
		# Site -> the bench id Frappe computes inside it, which names its acknowledgement key.
		self.bench_ids: dict[str, str] = {}

	def new_term(self) -> None:
		"""This process was elected: an earlier term's may be stale, so only this term's reconciles acknowledge."""
		self.bench_ids.clear()

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
			self.keys.frappe_jobs_ack_key(bench_id, site) for site, bench_id in sites.items() if site not in left_out
		)
