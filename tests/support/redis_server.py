"""A private redis-server on a claimed loopback port, started and stopped by its owner."""

from __future__ import annotations

import shutil
import subprocess
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import redis

from tests.support.ports import claim_port
from tests.support.slack import patient


def spawn_redis(
	args_for: Callable[[int], list[str]],
	port: int,
	log: Path | None = None,
	password: str | None = None,
	keep_port: bool = False,
) -> tuple[subprocess.Popen, int]:
	"""Start `redis-server *args_for(port)` and return it with the port it serves on.

	It counts as up only once the server answering on the port reports this process's pid and has
	loaded its data: a server that answers there and is not ours (or ours exiting because the port
	was taken) is no start. It is tried again on a new port unless it must keep its own (a restarted server that
	clients or sentinels already know).
	"""
	output = ["--logfile", str(log)] if log else []
	for _attempt in range(5):
		process = subprocess.Popen(
			["redis-server", *args_for(port), *output], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
		)
		client = redis.Redis(host="127.0.0.1", port=port, password=password, socket_timeout=2, socket_connect_timeout=2)
		deadline = time.monotonic() + patient(10)
		try:
			while process.poll() is None and time.monotonic() < deadline:
				try:
					info = client.info()
					# INFO answers while an append-only file loads, when every other command is refused.
					if int(info["process_id"]) == process.pid and not int(info.get("loading", 0)):
						return process, port
				except (redis.RedisError, KeyError, ValueError):
					pass
				time.sleep(0.02)
		finally:
			client.close()
		if process.poll() is None:
			process.kill()
			process.wait()
		if keep_port:
			break
		port = claim_port()
	tail = log.read_text(errors="replace").splitlines()[-5:] if log and log.exists() else []
	raise RuntimeError(f"redis-server did not start on port {port}" + (f" (its log ends: {tail})" if tail else ""))


class RedisServer:
	"""`redis-server` in a temporary directory.

	With `persistent=True` it keeps an append-only file, so `restart()` comes
	back with the data (a Redis restart that keeps its data); `restart(wipe=True)`
	comes back empty (one that lost it).
	"""

	def __init__(self, persistent: bool = False, port: int | None = None, args: tuple[str, ...] = ()):
		if not shutil.which("redis-server"):
			raise RuntimeError("redis-server is not installed: apt-get install redis-server")
		self.persistent = persistent
		self.fixed_port = port is not None  # a port the test chose (and told others) is kept
		self.port = port or claim_port()
		self.dir = Path(tempfile.mkdtemp(prefix="btu-redis-"))
		self.process: subprocess.Popen | None = None
		self.args = args  # more redis-server options, e.g. ("--replicaof", "127.0.0.1", "6379")
		self.started_once = False

	@property
	def url(self) -> str:
		return f"redis://127.0.0.1:{self.port}/0"

	def client(self, **kwargs) -> redis.Redis:
		return redis.Redis.from_url(self.url, **kwargs)

	def arguments(self, port: int) -> list[str]:
		persistence = ["--appendonly", "yes", "--appendfsync", "always"] if self.persistent else ["--appendonly", "no"]
		return [
			"--port",
			str(port),
			"--bind",
			"127.0.0.1",
			"--save",
			"",
			"--dir",
			str(self.dir),
			*persistence,
			*self.args,
		]

	def start(self) -> RedisServer:
		# Once started, its clients know the port: a restart keeps it.
		keep = self.fixed_port or self.started_once
		self.process, self.port = spawn_redis(self.arguments, self.port, log=self.dir / "redis.log", keep_port=keep)
		self.started_once = True
		return self

	def stop(self) -> None:
		if self.process and self.process.poll() is None:
			self.process.terminate()
			try:
				self.process.wait(patient(10))
			except subprocess.TimeoutExpired:
				self.process.kill()
				self.process.wait()
		self.process = None

	def restart(self, wipe: bool = False, down_for: float = 0.0) -> None:
		self.stop()
		if wipe:
			for path in self.dir.iterdir():
				if path.is_dir():
					shutil.rmtree(path)
				elif path.name != "redis.log":
					path.unlink()
		time.sleep(down_for)
		self.start()

	def close(self) -> None:
		self.stop()
		shutil.rmtree(self.dir, ignore_errors=True)

	def __enter__(self) -> RedisServer:
		return self.start()

	def __exit__(self, *exc) -> None:
		self.close()
