"""Which Redis master the scheduler writes to, and how many replicas must hold its fire writes.

Redis replicates asynchronously: a master that dies can take its last writes
with it, and the replica promoted in its place lacks them. So the leader
follows each release with WAIT (`State.durably`), for as many replicas as
`replica_acks` asks and the master has connected: the replication stream is
ordered, so an acknowledged release means the replica holds it and every claim
before it, which survive the failover; a release no replica acknowledged in
time is logged (it may be planned and delivered again after a failover; the
task runner refuses a slot that already has a Task Log). Read every
heartbeat; a new master (Sentinel switched) is logged and reported to the
engine, which then reconciles at once: the promoted replica may lack the last
schedule edits too.
"""

from __future__ import annotations

import logging

import redis

from btu.scheduler_daemon.log import log_event
from btu.shared.redis_urls import redis_address

logger = logging.getLogger("btu.scheduler")


class Replication:
	def __init__(self, redis_conn, state, replica_acks: int):
		self.redis = redis_conn
		self.state = state
		self.replica_acks = replica_acks
		self.master: str | None = None
		self.connected: int | None = None  # None: not known (INFO refused)
		self.refused = False
		self.stale = True  # read again before the next fire (a Redis failure may have been a failover)

	def refresh(self) -> bool:
		"""Read the master's replication info, set how many replicas fire writes wait for; True if the master moved."""
		try:
			info = self.redis.info("replication")
		except redis.exceptions.NoPermissionError as exc:
			if not self.refused:
				log_event(
					logger,
					logging.WARNING,
					"redis_replicas_unknown",
					error=str(exc),
					effect="fires do not wait for replicas; grant +info and +wait (btu-scheduler setup redis-acl)",
				)
			self.refused = True
			self.stale = False
			self.state.replicas_wanted = 0
			return self.note_master()
		self.refused = False
		self.stale = False
		connected = int(info.get("connected_slaves") or 0)
		self.state.replicas_wanted = min(self.replica_acks, connected)
		if connected != self.connected:
			log_event(
				logger,
				logging.INFO if connected else logging.WARNING,
				"redis_replicas",
				master=redis_address(self.redis),
				connected=connected,
				acks=self.state.replicas_wanted,
				effect="fire writes wait for replicas"
				if self.state.replicas_wanted
				else "fire writes are on this Redis only until a replica connects",
			)
			self.connected = connected
		return self.note_master()

	def note_master(self) -> bool:
		address = redis_address(self.redis)
		changed = self.master is not None and address != self.master
		if changed:
			log_event(
				logger,
				logging.WARNING,
				"redis_master_changed",
				previous=self.master,
				master=address,
				effect="reconciling every site now",
			)
		self.master = address
		return changed

	def describe(self) -> dict:
		"""For the heartbeat: the master and its replicas as last read."""
		return {"redis": self.master, "replicas": self.connected, "replica_acks": self.state.replicas_wanted}
