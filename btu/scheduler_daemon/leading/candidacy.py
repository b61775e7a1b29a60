"""What kind of scheduler this process is, and what that changes: a dedicated one (`btu-scheduler run`) or a Frappe
worker's candidate (`--for-worker`, started by the worker: worker_candidate).

A dedicated scheduler leads in preference: a candidate leaves a free lease to a dedicated scheduler that stands by
(it takes it), and a candidate that leads hands the lease over once one stands by. Read from the live heartbeats
(`liveness.processes`): a dedicated leader holds the lease already, and one killed leaves a heartbeat saying
leader, which no candidate waits for. So a dedicated scheduler's start moves the lead to it within a heartbeat, and
its death leaves it to a candidate within the lease's time; the lead never goes back and forth.
"""

from __future__ import annotations

import time

from btu.shared import liveness
from btu.shared.keys import Keys

# How often a leading candidate looks for a dedicated scheduler standing by (the heartbeat's period).
CHECK_SECS = 5.0


class Candidacy:
	def __init__(self, redis_conn, keys: Keys, process_id: str, worker_pid: int | None):
		self.redis = redis_conn
		self.keys = keys
		self.process_id = process_id
		self.worker_pid = worker_pid
		self.kind = liveness.WORKER if worker_pid else liveness.DEDICATED
		self.next_check = 0.0

	@property
	def is_worker(self) -> bool:
		return self.kind == liveness.WORKER

	def defers(self) -> bool:
		"""A candidate standing by: whether to leave the lease to a dedicated scheduler standing by too."""
		return self.is_worker and self.dedicated_standing_by()

	def yields(self) -> bool:
		"""A candidate leading, at most every CHECK_SECS: whether to hand the lease over to a dedicated scheduler."""
		if not self.is_worker or time.monotonic() < self.next_check:
			return False
		self.next_check = time.monotonic() + CHECK_SECS
		return self.dedicated_standing_by()

	def dedicated_standing_by(self) -> bool:
		return any(
			info.get("kind", liveness.DEDICATED) == liveness.DEDICATED
			and info.get("role") == "standby"
			and info.get("id") != self.process_id
			for info in liveness.processes(self.redis, self.keys)
		)

	def fields(self) -> dict:
		"""What the heartbeat and the leader's log line say of it."""
		return {"kind": self.kind, "worker_pid": self.worker_pid}
