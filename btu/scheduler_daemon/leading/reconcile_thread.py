"""The leader's reconcile thread: the reconciler run while this process leads, and the status it publishes.

Every site at once when `due` is set (an election, Redis lost the state, a state moved aside) and until the term's
first full cycle has ended, else a slice a tick (`Reconciler.stagger`). A new term's catch-up waits for that first
cycle (`catch_up_held`): the Redis state still holds what was deleted while no leader ran. The published status is
built here rather than on the firing thread (a thousand sites take it a tenth of a second): when a cycle ends, and
soon after fires were released (`publish_soon`).
"""

from __future__ import annotations

import logging
import threading
import time

from btu.scheduler_daemon.leading import status
from btu.scheduler_daemon.leading.lease import Lease
from btu.scheduler_daemon.log import log_event
from btu.scheduler_daemon.operations import redis_acl
from btu.scheduler_daemon.operations.config import Config
from btu.scheduler_daemon.operations.redis_failures import is_outage
from btu.scheduler_daemon.reconcile.reconciler import Reconciler
from btu.scheduler_daemon.store.state import State
from btu.shared.redis_refusals import is_denied

logger = logging.getLogger("btu.scheduler")
# Fires were released: the Desk's published status shows them within this long.
STATUS_AFTER_FIRES_SECONDS = 5.0
# A term's first full reconcile did not finish: tried again after this (the term's catch-up waits for it).
FULL_RETRY_SECONDS = 5.0


class ReconcileThread:
	"""Runs `reconciler` while `lease` is held; `wake` wakes the firing loop when the term's catch-up may go."""

	def __init__(
		self,
		reconciler: Reconciler,
		lease: Lease,
		config: Config,
		state: State,
		access: redis_acl.Access,
		wake: threading.Event,
	):
		self.reconciler = reconciler
		self.lease = lease
		self.config = config
		self.state = state
		self.access = access
		self.wake = wake
		self.due = threading.Event()  # every site now
		self.reconciled_term: int | None = None  # the lease epoch whose first full cycle ended
		self.next_status = 0.0  # when the status is next published
		self.status_at = float("-inf")  # when it last was
		self.publisher = status.Publisher(state.keys)

	def new_term(self) -> None:
		"""Elected: every site now, and the status published afresh (another leader wrote the state meanwhile)."""
		self.publisher = status.Publisher(self.state.keys)
		self.due.set()

	def catch_up_held(self) -> bool:
		"""Whether this term's first full cycle has yet to end: fires missed while no leader ran wait for it."""
		return self.reconciled_term != self.lease.epoch

	def publish_soon(self) -> None:
		self.next_status = min(self.next_status, time.monotonic() + STATUS_AFTER_FIRES_SECONDS)

	def run(self, stop: threading.Event) -> None:
		next_slice = time.monotonic() + self.interval()
		while not stop.is_set():
			interval = self.interval()
			until = next_slice
			if self.lease.held:
				# At most STATUS_AFTER_FIRES_SECONDS: the firing thread may bring `next_status` forward meanwhile.
				until = min(until, self.next_status, time.monotonic() + STATUS_AFTER_FIRES_SECONDS)
			due = self.due.wait(max(0.0, until - time.monotonic()))
			self.due.clear()
			if stop.is_set() or not self.lease.held:
				next_slice = time.monotonic() + interval
				continue
			try:
				cycles = self.reconciler.snapshot().cycles_done
				if due or self.catch_up_held():
					next_slice = time.monotonic() + FULL_RETRY_SECONDS  # stands if the reconcile fails
					if self.full():
						next_slice = time.monotonic()  # the staggered cycle starts at once
				elif time.monotonic() >= next_slice:
					next_slice = time.monotonic() + interval  # stands if the slice fails
					next_slice = time.monotonic() + self.reconciler.stagger(interval)
				ended = self.reconciler.snapshot().cycles_done != cycles
				# A cycle's end publishes unless the status is fresh: a minute's cycle and timer publish once a minute.
				if time.monotonic() >= self.next_status or (
					ended and time.monotonic() >= self.status_at + status.PUBLISH_SECONDS / 2
				):
					self.publish()
				self.access.ok()
			except Exception as exc:
				if is_denied(exc):
					self.access.denied(exc)
				elif not is_outage(exc):  # the main loop reports outages and refusals
					log_event(
						logger, logging.ERROR, "reconcile_failed", exc_info=True, error=f"{type(exc).__name__}: {exc}"
					)

	def full(self) -> bool:
		"""Every site now; True when the cycle ended. The term's first one lets its catch-up go."""
		term, cycles = self.lease.epoch, self.reconciler.snapshot().cycles_done
		self.reconciler.full()
		if self.reconciler.snapshot().cycles_done == cycles:
			return False
		if self.reconciled_term != term:
			self.reconciled_term = term
			self.wake.set()
		return True

	def interval(self) -> float:
		return self.config.refresh_interval(self.reconciler.snapshot().cycle_sites)

	def publish(self) -> None:
		self.status_at = time.monotonic()
		self.next_status = self.status_at + status.PUBLISH_SECONDS
		self.publisher.publish(self.state.redis, self.reconciler.health(), self.state.changes)
