"""Database connections, bounded per database server rather than per site.

Frappe gives every site its own database user, so one connection serves one site.
A bench of 1,000 sites on one MariaDB whose `max_connections` is 151 (the
default) must still leave that server to Frappe's own web and worker processes:
the scheduler holds at most `db_max_connections` connections to each server,
whatever the number of sites. A site's read takes an idle connection of its own
if there is one, else opens one while under the bound, else closes the idle
connection used longest ago and opens its own in its place, else waits for one
to come back. Waiting is not an outage: only a connect or a query that fails
makes a site "unreachable". Connections idle longer than `db_idle_secs` close.
"""

from __future__ import annotations

import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from btu.scheduler_daemon.reads.bench import Site


class PoolTimeout(Exception):
	"""No connection to the server came free in time: every one was busy for the whole wait."""


@dataclass(frozen=True)
class Server:
	"""Where connections go: sites on one server share its bound."""

	db_type: str
	address: str  # "host:port", or the socket's path

	@classmethod
	def of(cls, site: Site) -> Server:
		params = site.db_params
		return cls(site.db_type, params["socket"] or f"{params['host']}:{params['port']}")

	def __str__(self) -> str:
		return f"{self.db_type} at {self.address}"


def login(site: Site) -> tuple:
	"""What a connection was opened with: a site whose credentials changed never gets one opened with the old."""
	params = site.db_params
	return (params["database"], params["user"], params["password"], params["host"], params["port"], params["socket"])


@dataclass
class Idle:
	connection: Any
	login: tuple
	since: float  # monotonic


class ServerPool:
	"""At most `limit` open connections to one server, each bound to the site (login) it was opened for."""

	def __init__(
		self, server: Server, limit: int, idle_secs: float, open_connection: Callable[[Site], Any], wait_secs: float
	):
		self.server = server
		self.limit = limit
		self.idle_secs = idle_secs
		self.wait_secs = wait_secs
		self.open_connection = open_connection
		self.open = 0  # connections open or being opened, idle ones included
		self.peak = 0
		self.waits = 0  # reads that had to wait for a connection
		self.idle: OrderedDict[int, Idle] = OrderedDict()  # least recently used first
		self.freed = threading.Condition()

	@contextmanager
	def connection(self, site: Site) -> Iterator[Any]:
		"""A connection to the site's database for one read; a read that raises drops it (it may be broken)."""
		connection = self.take(site)
		try:
			yield connection
		except BaseException:
			self.drop(connection)
			raise
		self.give_back(site, connection)

	def take(self, site: Site) -> Any:
		key = login(site)
		deadline = time.monotonic() + self.wait_secs
		evicted = None
		with self.freed:
			while True:
				for slot, idle in reversed(self.idle.items()):
					if idle.login == key:
						del self.idle[slot]
						return idle.connection
				if self.open < self.limit:
					self.open += 1
					self.peak = max(self.peak, self.open)
					break
				if self.idle:
					# Another site's idle connection makes room: this one is opened in its place.
					_, lru = self.idle.popitem(last=False)
					evicted = lru.connection
					break
				remaining = deadline - time.monotonic()
				if remaining <= 0:
					raise PoolTimeout(
						f"{self.server}: all {self.limit} connections of db_max_connections "
						f"stayed busy for {self.wait_secs:g} s"
					)
				self.waits += 1
				self.freed.wait(remaining)
		close_quietly(evicted)
		try:
			return self.open_connection(site)
		except BaseException:
			self.released()
			raise

	def give_back(self, site: Site, connection) -> None:
		with self.freed:
			self.idle[id(connection)] = Idle(connection, login(site), time.monotonic())
			self.freed.notify()

	def drop(self, connection) -> None:
		close_quietly(connection)
		self.released()

	def released(self) -> None:
		with self.freed:
			self.open -= 1
			self.freed.notify()

	def close_idle(self, everything: bool = False) -> int:
		"""Close the connections idle longer than idle_secs (all idle ones with `everything`); returns how many."""
		cutoff = time.monotonic() - (0 if everything else self.idle_secs)
		with self.freed:
			stale = [slot for slot, idle in self.idle.items() if everything or idle.since <= cutoff]
			closing = [self.idle.pop(slot).connection for slot in stale]
			self.open -= len(closing)
			self.freed.notify_all()
		for connection in closing:
			close_quietly(connection)
		return len(closing)

	def snapshot(self) -> dict:
		with self.freed:
			return {
				"server": str(self.server),
				"open": self.open,
				"idle": len(self.idle),
				"peak": self.peak,
				"limit": self.limit,
				"waits": self.waits,
			}


class Connections:
	"""A bench's connection pools: one per database server, each holding at most `limit` connections."""

	def __init__(
		self, open_connection: Callable[[Site], Any], limit: int = 4, idle_secs: float = 60.0, wait_secs: float = 60.0
	):
		self.open_connection = open_connection
		self.limit = limit
		self.idle_secs = idle_secs
		self.wait_secs = wait_secs
		self.pools: dict[Server, ServerPool] = {}
		self.lock = threading.Lock()

	def pool(self, site: Site) -> ServerPool:
		server = Server.of(site)
		with self.lock:
			pool = self.pools.get(server)
			if pool is None:
				pool = self.pools[server] = ServerPool(
					server, self.limit, self.idle_secs, self.open_connection, self.wait_secs
				)
			return pool

	def close_idle(self, everything: bool = False) -> int:
		with self.lock:
			pools = list(self.pools.values())
		return sum(pool.close_idle(everything) for pool in pools)

	def snapshot(self) -> list[dict]:
		with self.lock:
			pools = list(self.pools.values())
		return [pool.snapshot() for pool in pools]


def close_quietly(connection) -> None:
	if connection is None:
		return
	try:
		connection.close()
	except Exception:
		pass
