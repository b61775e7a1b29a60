"""How the scheduler's main loop meets a failing Redis: each kind of failure logged once, a back-off, and one line when
it is restored.

Redis not answering, or refusing (out of memory, a read-only replica, a permission, a wrong value the state layer
did not expect): the process backs off and tries again, never exits.
"""

from __future__ import annotations

import logging
import threading
import time

import redis

from btu.scheduler_daemon.log import log_event
from btu.shared.redis_refusals import is_denied

logger = logging.getLogger("btu.scheduler")
REDIS_ERRORS = (redis.RedisError, ConnectionError, OSError)
OUTAGES = (redis.ConnectionError, redis.TimeoutError, ConnectionError, OSError)
# Redis answering but refusing every write (lua/guard.lua's SERVER_WIDE): redis-py 5+ raises these
# classes, 4.5 a plain ResponseError starting with the code. The main loop reports those.
REFUSALS = (
	redis.ReadOnlyError,
	redis.BusyLoadingError,
	getattr(redis.exceptions, "OutOfMemoryError", redis.ReadOnlyError),
)
REFUSAL_CODES = ("OOM", "READONLY", "MASTERDOWN", "LOADING", "BUSY", "NOREPLICAS", "MISCONF")
MAX_BACKOFF = 5.0
RESTORED_AFTER_SECONDS = 2.0
OUTAGE_KINDS = "outage:"  # how redis_failure names an outage (any other failure is a refusal)
# A failure's kind (btu_redis_errors_total) -> the event it logs.
ERROR_EVENTS = {"outage": "redis_unreachable", "refusal": "redis_refused", "error": "redis_error"}


class RedisFailures:
	"""The main loop's view of Redis: `down` since a failure, `error` the kind last logged, `backoff` the next wait."""

	def __init__(self, process_id: str, access, replication, metrics):
		self.process_id = process_id
		self.access = access  # redis_acl.Access of the main loop: a refused permission is reported there
		self.replication = replication
		self.metrics = metrics
		self.down = False
		self.error: str | None = None
		self.failed_at = 0.0
		self.backoff = 0.1

	def ok(self) -> None:
		"""A loop went through. After an outage Redis is restored at once; after a refusal (a permission's
		included) only once none has failed for RESTORED_AFTER_SECONDS: under a refusal some steps still pass
		(a lease renewal writes nothing new), and one such step must not make the next failure a new one to log."""
		quiet = time.monotonic() - self.failed_at >= RESTORED_AFTER_SECONDS
		if quiet:
			self.access.ok()
		refused = self.error is not None and not self.error.startswith(OUTAGE_KINDS)
		if self.down and (not refused or quiet):
			self.down = False
			self.error = None
			log_event(logger, logging.INFO, "redis_restored", process=self.process_id)

	def failed(self, exc: Exception, stop: threading.Event) -> None:
		"""Log once per kind of failure (a refused permission through `access`), then back off (at most MAX_BACKOFF)."""
		self.failed_at = time.monotonic()
		self.replication.stale = (
			True  # the Redis that answers next may be a promoted replica, with replicas of its own or none
		)
		if not (self.down or self.access.reason):
			self.backoff = 0.1
		if is_denied(exc):
			# Redis answers but refuses this user (grants revoked, password changed): not an outage.
			self.metrics.redis_error("denied")
			self.access.denied(exc)
		else:
			kind = redis_failure(exc)
			error_kind = "outage" if isinstance(exc, OUTAGES) else "refusal" if is_outage(exc) else "error"
			self.metrics.redis_error(error_kind)
			if kind != self.error:
				event = ERROR_EVENTS[error_kind]
				# An error that is neither an outage nor a refusal is a wrong value no guard expected: its traceback
				# says where.
				log_event(
					logger,
					logging.ERROR,
					event,
					exc_info=event == "redis_error",
					process=self.process_id,
					error=f"{type(exc).__name__}: {exc}",
					effect="retrying; missed fires follow each schedule's catch-up policy",
				)
			self.down = True
			self.error = kind
		stop.wait(self.backoff)
		self.backoff = min(self.backoff * 2, MAX_BACKOFF)


def redis_failure(exc: Exception) -> str:
	"""What kind of failure `exc` is, to log each once: "outage:" or "refusal:", its class and Redis's error code."""
	code = str(exc).split(" ", 1)[0]
	return (
		f"{'outage' if isinstance(exc, OUTAGES) else 'refusal'}:{type(exc).__name__}:{code if code.isupper() else ''}"
	)


def is_outage(exc: Exception) -> bool:
	"""Redis down, or refusing every write (out of memory, a read-only replica, loading): no wrong value nor a bug."""
	return isinstance(exc, (*OUTAGES, *REFUSALS)) or str(exc).split(" ", 1)[0] in REFUSAL_CODES
