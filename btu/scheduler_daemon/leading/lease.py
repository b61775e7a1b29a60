"""The leader lease: one scheduler process fires, the others stand by.

The lease is a Redis key set with PX, so Redis's own clock times it out and
host clock skew cannot make two leaders. Its value "<epoch>|<holder>" is the
fencing token: the epoch grows with every new leader, and the fire scripts
writes nothing unless the caller's token is still the key's value, so a
stalled former leader cannot enqueue.
"""

from __future__ import annotations

import time

from btu.scheduler_daemon.store import scripts
from btu.shared.keys import Keys

# The longest lease any scheduler may set (config's lease_ttl_secs maximum): a lease key that
# lives longer was not written by one, and is moved aside rather than obeyed.
MAX_TTL_MS = 3600 * 1000


class Lease:
	def __init__(self, redis_conn, keys: Keys, holder: str, ttl_secs: float):
		self.redis = redis_conn
		self.keys = keys
		self.holder = holder
		self.ttl_ms = max(int(ttl_secs * 1000), 100)
		self.value: str | None = None
		self.valid_until = 0.0  # monotonic: the lease runs out then unless renewed (measured from before the call)
		self._acquire = scripts.register(redis_conn, keys, "lease_acquire")
		self._renew = scripts.register(redis_conn, keys, "lease_renew")
		self._release = scripts.register(redis_conn, keys, "lease_release")

	@property
	def held(self) -> bool:
		return self.value is not None

	@property
	def epoch(self) -> int | None:
		return int(self.value.split("|", 1)[0]) if self.value else None

	def valid(self) -> bool:
		"""Held, and not past the end of the last acquire or renewal: a leader cut off from Redis stops being one."""
		return self.held and time.monotonic() < self.valid_until

	def acquire(self) -> bool:
		started = time.monotonic()
		value = self._acquire(
			keys=[self.keys.leader, self.keys.leader_epoch], args=[self.holder, self.ttl_ms, MAX_TTL_MS]
		)
		self.value = value.decode() if isinstance(value, bytes) else value
		self.valid_until = started + self.ttl_ms / 1000 if self.held else 0.0
		return self.held

	def renew(self) -> bool:
		started = time.monotonic()
		if self.value and not self._renew(keys=[self.keys.leader], args=[self.value, self.ttl_ms]):
			self.value = None
		if self.held:
			self.valid_until = started + self.ttl_ms / 1000
		return self.held

	def release(self) -> None:
		if self.value:
			self._release(keys=[self.keys.leader], args=[self.value])
			self.redis.publish(self.keys.handoff_channel, self.holder)
		self.value = None

	def lost(self) -> None:
		"""Forget the lease without touching Redis (a fire script said we no longer hold it)."""
		self.value = None

	def current(self) -> tuple[str | None, int]:
		"""The lease's value and its remaining time in ms (-2 when nobody holds it)."""
		with self.redis.pipeline() as pipe:
			value, pttl = pipe.get(self.keys.leader).pttl(self.keys.leader).execute()
		return (value.decode() if isinstance(value, bytes) else value), pttl
