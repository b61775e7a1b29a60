"""What the original BTU's scheduler daemons leave in Redis, and whether one still runs there or on its socket.

Both the Rust daemon and btu_scheduler_py keep their next fires in one sorted set, member `<schedule>|<unix
seconds>`, score that moment, on the bench's queue Redis; each polls it (every 60 s by default) and removes what
is due. So entries due minutes ago that are still there mean no such daemon runs; entries all in the future mean
one may, and it would fire the same schedules as BTU.
"""

from __future__ import annotations

import socket
from dataclasses import dataclass
from pathlib import Path

import redis

from btu.shared.redis_refusals import redis_user

NEXT_FIRES_KEY = "btu_scheduler:task_execution_times"
# The daemon's default polling interval, doubled, plus slack: an entry overdue longer than this is not being polled.
STALE_AFTER_SECS = 300


@dataclass(frozen=True)
class OldDaemon:
	"""The original daemon's sorted set as found: how many entries, the earliest moment, and what it means."""

	entries: int
	earliest: float
	now: float

	@property
	def polled(self) -> bool:
		"""Whether something removes due entries: none is overdue by more than STALE_AFTER_SECS."""
		return self.earliest >= self.now - STALE_AFTER_SECS

	def describe(self) -> str:
		if self.polled:
			late = int(self.now - self.earliest)
			earliest = (
				f"the earliest {late} s overdue, as a daemon polling every 60 s may leave it"
				if late > 0
				else f"the earliest due in {-late} s"
			)
			return (
				"the original BTU's daemon may still be running on this Redis: "
				f"{NEXT_FIRES_KEY} holds {self.entries} next fires, {earliest}; "
				"stop it (systemctl stop btu_scheduler, or btu-py's service) so no schedule fires twice, "
				f"then DEL {NEXT_FIRES_KEY}"
			)
		return (
			f"the original BTU's daemon left {NEXT_FIRES_KEY} behind ({self.entries} entries, the earliest "
			f"{int(self.now - self.earliest)} s overdue, so none runs now); delete it: redis-cli DEL {NEXT_FIRES_KEY}"
		)


def find(redis_conn, now: float) -> OldDaemon | None:
	"""The original daemon's sorted set on `redis_conn`, or None when there is none (two reads)."""
	entries = redis_conn.zcard(NEXT_FIRES_KEY)
	if not entries:
		return None
	earliest = redis_conn.zrange(NEXT_FIRES_KEY, 0, 0, withscores=True)
	return OldDaemon(entries=int(entries), earliest=float(earliest[0][1]) if earliest else now, now=now)


def report(redis_conn, now: float) -> str | None:
	"""What the original daemon left on `redis_conn`, and whether it still runs; None when nothing is found.

	Read only as Redis's default user, the one the original's daemon (which never logs in) used: an ACL user of
	BTU's may read btu: keys only, and a refused read would fill Redis's ACL log."""
	if redis_user(redis_conn) != "default":
		return None
	try:
		found = find(redis_conn, now)
	except redis.RedisError:
		return None
	return found.describe() if found else None


def socket_report(path: str | None) -> str | None:
	"""Whether the original's Rust daemon listens on its Unix socket (BTU Configuration's `path_to_btu_scheduler_uds`,
	which the upgrade leaves in place): connected to, nothing sent. None when nothing listens there."""
	if not path or not Path(path).is_socket():
		return None
	with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as client:
		client.settimeout(0.5)
		try:
			client.connect(path)
		except OSError:
			return None
	return (
		f"the original BTU's daemon listens on {path}: "
		"stop it (systemctl stop btu_scheduler) so no schedule fires twice"
	)
