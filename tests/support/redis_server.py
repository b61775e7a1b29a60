"""A private redis-server on a free loopback port, started and stopped by its owner."""

from __future__ import annotations

import shutil
import socket
import subprocess
import tempfile
import time
from pathlib import Path

import redis


def free_port() -> int:
	with socket.socket() as sock:
		sock.bind(("127.0.0.1", 0))
		return sock.getsockname()[1]


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
		self.port = port or free_port()
		self.dir = Path(tempfile.mkdtemp(prefix="btu-redis-"))
		self.process: subprocess.Popen | None = None
		self.args = args  # more redis-server options, e.g. ("--replicaof", "127.0.0.1", "6379")

	@property
	def url(self) -> str:
		return f"redis://127.0.0.1:{self.port}/0"

	def client(self, **kwargs) -> redis.Redis:
		return redis.Redis.from_url(self.url, **kwargs)

	def start(self) -> "RedisServer":
		persistence = ["--appendonly", "yes", "--appendfsync", "always"] if self.persistent else ["--appendonly", "no"]
		self.process = subprocess.Popen(
			["redis-server", "--port", str(self.port), "--bind", "127.0.0.1", "--save", "", "--dir", str(self.dir), *persistence, *self.args],
			stdout=subprocess.DEVNULL,
			stderr=subprocess.DEVNULL,
		)
		deadline = time.monotonic() + 10
		while time.monotonic() < deadline:
			try:
				if self.client(socket_timeout=0.5).ping():
					return self
			except redis.ConnectionError:
				time.sleep(0.02)
		raise RuntimeError(f"redis-server on port {self.port} did not answer within 10 s")

	def stop(self) -> None:
		if self.process and self.process.poll() is None:
			self.process.terminate()
			try:
				self.process.wait(10)
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
				else:
					path.unlink()
		time.sleep(down_for)
		self.start()

	def close(self) -> None:
		self.stop()
		shutil.rmtree(self.dir, ignore_errors=True)

	def __enter__(self) -> "RedisServer":
		return self.start()

	def __exit__(self, *exc) -> None:
		self.close()
