"""The reconciler's lock, which a full reconcile holds a site (a chunk of a big site) at a time and an RPC's edit for
its whole edit; between two holds the reconcile lets the edits waiting go first (`let_edits_in`)."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager


class ReconcileLock:
	"""The reconciler's lock (reentrant), taken with `with`; an RPC's edit takes it with `edit()`. A lock does not queue
	its waiters: a full reconcile that released it between two chunks of a site would take it again before a waiting
	edit woke, and the edit would wait for the whole site after all. So between chunks the reconcile calls
	`let_edits_in`, which returns once every edit that was waiting has taken the lock (never while holding it)."""

	# The longest `let_edits_in` waits, should an edit never take the lock (it cannot: it is free).
	HANDOFF_SECS = 10.0

	def __init__(self):
		self.lock = threading.RLock()
		self.waiting = 0  # edits waiting for the lock
		self.taken = threading.Condition(threading.Lock())

	def __enter__(self) -> ReconcileLock:
		self.lock.acquire()
		return self

	def __exit__(self, *exc) -> None:
		self.lock.release()

	@contextmanager
	def edit(self) -> Iterator[None]:
		with self.taken:
			self.waiting += 1
		try:
			self.lock.acquire()
		finally:
			with self.taken:
				self.waiting -= 1
				self.taken.notify_all()
		try:
			yield
		finally:
			self.lock.release()

	def let_edits_in(self) -> None:
		with self.taken:
			self.taken.wait_for(lambda: not self.waiting, self.HANDOFF_SECS)
