"""Helpers of the RPC tests: a recording dispatcher, a listener in a thread, raw pings.

The dispatcher here records what the listener hands it; the engine is not the
unit under test. It knows two sites and a few schedules per site.
"""

from __future__ import annotations

import json
import re
import socket
import threading
import time

from btu.scheduler_daemon.rpc.listener import CommandListener, CommandRejected
from btu.shared import protocol
from tests.support.keys import KEYS
from tests.support.slack import patient

SITES = {
	"site1.localhost": {f"TS-{n:06d}" for n in range(1, 1201)},
	"site2.localhost": {"TS-000001", "TS-900000", "TS-SETTLE"},
}
# `settle` cancels this schedule as a marker; it is left out of `schedules()`.
SETTLE_SITE, SETTLE_SCHEDULE = "site2.localhost", "TS-SETTLE"
DEFAULT_SITE = "site1.localhost"


class RecordingDispatcher:
	"""Resolves sites and schedules from `SITES`; `execute` records each call, optionally slowly."""

	def __init__(self, delay: float = 0.0, default_site: str | None = DEFAULT_SITE, observer=None):
		self.delay = delay
		self.default_site = default_site
		self.observer = observer
		self.lock = threading.Lock()
		self.executed: list[dict] = []
		self.calls: list[tuple[str, list[str]]] = []
		self.checks = 0

	def resolve_site(self, site: str | None) -> str:
		if site is None:
			if self.default_site:
				return self.default_site
			if len(SITES) == 1:
				return next(iter(SITES))
			raise CommandRejected(f'no site given and the bench has several ({", ".join(sorted(SITES))}): add "site"')
		if site not in SITES:
			raise CommandRejected(f"site {site!r} is not a site of this bench; known: {', '.join(sorted(SITES))}")
		return site

	def check_targets(self, site: str, request_type: str, names: list[str]) -> dict[str, str]:
		self.checks += 1
		return {
			name: f"{request_type}: {name!r} is not a BTU Task Schedule of site {site}"
			for name in names
			if name not in SITES[site]
		}

	def execute(self, site: str, names: list[str]) -> None:
		"""One record per schedule name; `calls` counts the calls."""
		started = time.perf_counter()
		observed = self.observer(site, names) if self.observer is not None else None
		if self.delay:
			time.sleep(self.delay)
		finished = time.perf_counter()
		records = [
			{
				"site": site,
				"name": name,
				"thread": threading.current_thread().name,
				"started": started,
				"finished": finished,
				"observed": observed,
			}
			for name in names
		]
		with self.lock:
			self.calls.append((site, list(names)))
			self.executed += records

	def schedules(self) -> list[str]:
		"""Schedule names executed, in order, the settle marker left out."""
		with self.lock:
			return [record["name"] for record in self.executed if record["name"] != SETTLE_SCHEDULE]

	def settled(self) -> int:
		with self.lock:
			return sum(1 for record in self.executed if record["name"] == SETTLE_SCHEDULE)


class RunningListener:
	"""A listener thread and what it was given; `stop()` ends it."""

	def __init__(self, client, dispatcher, name: str = "listener", block_seconds: float = 0.25, **options):
		self.client = client
		self.dispatcher = dispatcher
		self.stop_event = threading.Event()
		# A short block only makes teardown quicker; the product's default is listener.BLOCK_SECONDS.
		self.listener = CommandListener(
			client, KEYS, dispatcher, process_id=name, block_seconds=block_seconds, **options
		)
		self.thread = threading.Thread(target=self.listener.run, args=(self.stop_event,), name=name, daemon=True)
		self.thread.start()

	def stop(self) -> None:
		self.stop_event.set()
		self.thread.join(patient(10))
		assert not self.thread.is_alive(), f"the listener did not stop within {patient(10)} s of its stop event"
		self.client.close()


def raw_ping(r, timeout: float = 30) -> dict:
	"""A ping in raw Redis commands; its ACK means every command pushed before it was popped and
	replied to (FIFO), not that it was executed (see `settle`)."""
	key = protocol.new_response_key(KEYS)
	timeout = patient(timeout)
	r.lpush(KEYS.commands, json.dumps({"request_type": "ping", "request_content": None, "response_key": key}))
	answer = r.blpop([key], timeout=timeout)
	assert answer is not None, f"no ACK for a ping within {timeout} s"
	return json.loads(answer[1])


def settle(r, dispatcher: RecordingDispatcher, timeout: float = 30) -> None:
	"""Return once every command pushed before now was replied to and executed (one listener).

	A ping's ACK is not enough: commands popped in one batch are all ACKed
	before any is executed. So a marker command is sent and its execution,
	which comes after every earlier one, awaited.
	"""
	before = dispatcher.settled()
	timeout = patient(timeout)
	key = protocol.new_response_key(KEYS)
	r.lpush(
		KEYS.commands,
		json.dumps(
			protocol.make_command(
				KEYS,
				protocol.CANCEL_TASK_SCHEDULE,
				SETTLE_SCHEDULE,
				site=SETTLE_SITE,
				response_key=key,
			)
		),
	)
	answer = r.blpop([key], timeout=timeout)
	assert answer is not None and json.loads(answer[1])["status"] == "ok", "no ACK for the settle marker"
	deadline = time.monotonic() + timeout
	while dispatcher.settled() == before:
		assert time.monotonic() < deadline, "the settle marker was ACKed but never executed"
		time.sleep(0.002)


def foreign_keys(r) -> list[bytes]:
	"""Keys outside the response keys and the command list."""
	return sorted(
		key
		for key in r.keys("*")
		if not key.startswith(KEYS.response_prefix.encode()) and key != KEYS.commands.encode()
	)


class Monitor:
	"""Redis MONITOR on a raw socket: every command the server executes, with its client's address."""

	LINE = re.compile(r"^\+(?P<time>[\d.]+) \[\d+ (?P<addr>[^\]]+)\] (?P<args>.*)$")
	ARG = re.compile(r'"((?:[^"\\]|\\.)*)"')

	def __init__(self, host: str, port: int):
		self.sock = socket.create_connection((host, port), timeout=5)
		self.sock.sendall(b"MONITOR\r\n")
		self.buffer = b""
		self.entries: list[tuple[str, list[str]]] = []
		self.done = threading.Event()
		self.thread = threading.Thread(target=self.read, daemon=True)
		self.sock.settimeout(0.1)
		self.thread.start()

	def read(self) -> None:
		while not self.done.is_set():
			try:
				chunk = self.sock.recv(65536)
			except TimeoutError:
				continue
			if not chunk:
				return
			self.buffer += chunk
			while b"\r\n" in self.buffer:
				line, self.buffer = self.buffer.split(b"\r\n", 1)
				match = self.LINE.match(line.decode("utf-8", "replace"))
				if match:
					args = [arg.encode().decode("unicode_escape") for arg in self.ARG.findall(match["args"])]
					self.entries.append((match["addr"], args))

	def close(self) -> list[tuple[str, list[str]]]:
		time.sleep(0.2)
		self.done.set()
		self.thread.join(5)
		self.sock.close()
		return self.entries
