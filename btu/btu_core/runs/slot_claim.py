"""One run per (schedule, slot, attempt), decided by the site's database.

Redis can lose its last writes when a master fails over, and a job released or
dequeued just before may then be delivered again. The site database is the
durable record: a delivery takes a server-wide named lock for its (schedule,
slot), looks for the slot's Task Log, and runs only if there is none, writing
its "Started" Log and committing before it lets the lock go. A second delivery,
concurrent or years later, finds that Log and is refused.

Look in a transaction begun after the lock is taken: under REPEATABLE READ
(MariaDB's default, Frappe's on Postgres) an older snapshot hides the Log
the delivery that held the lock has just committed.

Frappe-free so that the task runner and the tier-1 failover tests take the
same lock with the same SQL: `sql(query, params)` is `frappe.db.sql` or a
DB-API cursor's execute-and-fetch.
"""

from __future__ import annotations

import hashlib
import json
import time
from collections.abc import Callable

# Long enough for the other delivery to insert and commit its Log; a lock held longer belongs to a stuck process.
LOCK_WAIT_SECS = 30
POLL_SECS = 0.05

# Parameters: schedule, slot_utc, attempt. Logs written before retries existed have attempt 0 or NULL: the first.
LOG_FOR_SLOT_SQL = (
	"select name, status from `tabBTU Task Log` where schedule = %s and slot_utc = %s "
	"and coalesce(nullif(attempt, 0), 1) = %s order by creation desc limit 1"
)

Sql = Callable[[str, tuple], list]


class SlotLockTimeout(Exception):
	"""Another delivery of the same slot held its lock past the wait."""


def lock_key(database: str, schedule: str, slot_utc: str) -> str:
	"""The lock's name: named locks are server-wide (MariaDB caps a name at 64 characters), so it includes the
	database."""
	digest = hashlib.sha1(json.dumps([database, schedule, slot_utc]).encode()).hexdigest()
	return f"btu_slot_{digest}"


def attempt_slot(slot_utc: str, attempt: int) -> str:
	"""What a lock key names for a slot's attempt: the slot itself for the first (the key earlier BTU versions took)."""
	return slot_utc if attempt <= 1 else f"{slot_utc}#{attempt}"


def postgres_key(key: str) -> int:
	"""A signed 64-bit number for Postgres's advisory lock functions."""
	return int.from_bytes(hashlib.sha1(key.encode()).digest()[:8], "big", signed=True)


class SlotLock:
	"""`with SlotLock(sql, db_type, key):` holds the slot's lock (MariaDB GET_LOCK, Postgres advisory lock)."""

	def __init__(self, sql: Sql, db_type: str, key: str, wait_secs: float = LOCK_WAIT_SECS):
		if db_type not in ("mariadb", "postgres"):
			raise ValueError(f"db_type {db_type!r}: BTU's slot lock knows mariadb and postgres")
		self.sql = sql
		self.db_type = db_type
		self.key = key
		self.wait_secs = wait_secs

	def __enter__(self) -> SlotLock:
		if self.db_type == "mariadb":
			# GET_LOCK waits server-side; 1 is taken, 0 timed out, NULL an error.
			taken = self.sql("select get_lock(%s, %s)", (self.key, self.wait_secs))[0][0] == 1
		else:
			taken = self._postgres_take()
		if not taken:
			raise SlotLockTimeout(f"slot lock {self.key} still held after {self.wait_secs} s by another delivery")
		return self

	def _postgres_take(self) -> bool:
		deadline = time.monotonic() + self.wait_secs
		while True:
			if self.sql("select pg_try_advisory_lock(%s)", (postgres_key(self.key),))[0][0]:
				return True
			if time.monotonic() >= deadline:
				return False
			time.sleep(POLL_SECS)

	def __exit__(self, *exc) -> None:
		if self.db_type == "mariadb":
			self.sql("select release_lock(%s)", (self.key,))
		else:
			self.sql("select pg_advisory_unlock(%s)", (postgres_key(self.key),))
