"""A real Redis Sentinel topology on loopback: a master, a replica and three sentinels.

Debian's `redis-server` runs all five (`--sentinel` for the sentinels); each
has its own free port and temporary directory, and `close()` kills them all.
The sentinels notice a dead master after `down_after_ms` (DOWN_AFTER_MS unless told) and promote the replica.
"""

from __future__ import annotations

import shutil
import signal
import subprocess
import tempfile
import time
from pathlib import Path

import redis

from tests.support.ports import claim_port
from tests.support.redis_server import spawn_redis
from tests.support.slack import patient
from tests.support.tcp_proxy import TcpProxy

SERVICE = "btutest"
DOWN_AFTER_MS = 1000
FAILOVER_TIMEOUT_MS = 5000


class SentinelTopology:
	def __init__(
		self,
		master_password: str | None = None,
		sentinel_password: str | None = None,
		down_after_ms: int = DOWN_AFTER_MS,
	):
		self.down_after_ms = down_after_ms  # how long a server may not answer before the sentinels call it down
		self.master_password = master_password  # requirepass of the master and the replica (user default)
		self.sentinel_password = sentinel_password  # requirepass of the sentinels
		self.dir = Path(tempfile.mkdtemp(prefix="btu-sentinel-"))
		self.ports = {"a": claim_port(), "b": claim_port()}
		self.sentinel_ports = [claim_port() for _ in range(3)]
		self.processes: dict[str, subprocess.Popen] = {}
		self.replica_proxy: TcpProxy | None = None  # between the replica and the master, to cut the link

	def route_replica_through_proxy(self) -> None:
		"""Before start(): the replica reaches the master through a proxy, so `cut_replica_link` can starve it."""
		self.replica_proxy = TcpProxy("127.0.0.1", self.ports["a"])
		self.replica_proxy.up()

	def cut_replica_link(self) -> None:
		"""The replica stops receiving the master's writes (it keeps serving, and stays eligible for promotion)."""
		self.replica_proxy.down()

	# -- processes -------------------------------------------------------------

	def start(self) -> SentinelTopology:
		if not shutil.which("redis-server"):
			raise RuntimeError("redis-server is not installed: apt-get install redis-server")
		self.start_server("a")
		if self.replica_proxy:
			self.replica_proxy.target = ("127.0.0.1", self.ports["a"])
		self.start_server("b", replica_of=self.replica_proxy.port if self.replica_proxy else self.ports["a"])
		self.wait(self.replica_in_sync, 20, "the replica finished its first sync")
		for index, port in enumerate(self.sentinel_ports):
			self.sentinel_ports[index] = self.spawn_serving(
				f"sentinel-{index}", port, self.sentinel_args, self.sentinel_password
			)
		try:
			self.wait(
				lambda: all(self.sentinel_knows_replica(port) for port in self.sentinel_ports),
				15,
				"every sentinel saw the replica",
			)
		except RuntimeError as error:
			raise RuntimeError(f"{error}; {self.diagnosis()}") from None
		return self

	def diagnosis(self) -> str:
		"""What the master lists and each sentinel's last log lines, for a start that timed out."""
		try:
			replicas = {
				key: value
				for key, value in self.client(self.ports["a"]).info("replication").items()
				if key.startswith("slave")
			}
		except redis.RedisError as error:
			replicas = repr(error)
		logs = {
			name: (self.dir / f"{name}.log").read_text(errors="replace").splitlines()[-3:]
			for name in self.processes
			if name.startswith("sentinel") and (self.dir / f"{name}.log").exists()
		}
		return f"the master lists {replicas}; sentinel logs: {logs}"

	def sentinel_args(self, port: int) -> list[str]:
		conf = self.dir / f"sentinel-{port}.conf"
		conf.write_text(
			f"port {port}\nbind 127.0.0.1\ndir {self.dir}\n"
			f"sentinel monitor {SERVICE} 127.0.0.1 {self.ports['a']} 2\n"
			f"sentinel down-after-milliseconds {SERVICE} {self.down_after_ms}\n"
			f"sentinel failover-timeout {SERVICE} {FAILOVER_TIMEOUT_MS}\n"
			+ (f"sentinel auth-pass {SERVICE} {self.master_password}\n" if self.master_password else "")
			+ (f"requirepass {self.sentinel_password}\n" if self.sentinel_password else "")
		)
		return [str(conf), "--sentinel"]

	def replica_in_sync(self) -> bool:
		info = self.client(self.ports["b"]).info("replication")
		return info.get("master_link_status") == "up" and not int(info.get("master_sync_in_progress", 1))

	def start_server(self, name: str, replica_of: int | None = None, same_port: bool = False) -> None:
		data = self.dir / name
		data.mkdir(exist_ok=True)

		def args(port: int) -> list[str]:
			# No 5 s wait before a replica's first full sync (Redis 7's repl-diskless-sync-delay).
			args = [
				"--port",
				str(port),
				"--bind",
				"127.0.0.1",
				"--save",
				"",
				"--appendonly",
				"no",
				"--dir",
				str(data),
				"--repl-diskless-sync-delay",
				"0",
			]
			if replica_of:
				args += ["--replicaof", "127.0.0.1", str(replica_of)]
			if self.master_password:
				args += ["--requirepass", self.master_password, "--masterauth", self.master_password]
			return args

		self.ports[name] = self.spawn_serving(name, self.ports[name], args, self.master_password, same_port=same_port)

	def spawn_serving(self, name: str, port: int, args_for, password: str | None, same_port: bool = False) -> int:
		"""Start `redis-server` as `name` and return the port it serves on (tests.support.redis_server.spawn_redis)."""
		self.processes[name], port = spawn_redis(
			args_for, port, log=self.dir / f"{name}.log", password=password, keep_port=same_port
		)
		return port

	def close(self) -> None:
		if self.replica_proxy:
			self.replica_proxy.down()
		for process in self.processes.values():
			if process.poll() is None:
				process.kill()
				process.wait()
		shutil.rmtree(self.dir, ignore_errors=True)

	# -- what the sentinels say ------------------------------------------------------

	def sentinel_knows_replica(self, port: int) -> bool:
		try:
			return len(self.client(port).sentinel_slaves(SERVICE)) >= 1
		except redis.RedisError:
			return False

	def master(self) -> tuple[str, int]:
		"""The master as the sentinels name it."""
		for port in self.sentinel_ports:
			try:
				host, master_port = self.client(port).sentinel_get_master_addr_by_name(SERVICE)
				return host, int(master_port)
			except (redis.RedisError, TypeError):
				continue
		raise RuntimeError("no sentinel names a master")

	def master_name(self) -> str:
		port = self.master()[1]
		return next(name for name, own in self.ports.items() if own == port)

	def sentinel_addresses(self) -> list[tuple[str, int]]:
		return [("127.0.0.1", port) for port in self.sentinel_ports]

	def common_config(self) -> dict:
		"""Frappe's keys for a bench's queue Redis behind these sentinels."""
		return {
			"redis_queue": f"redis://127.0.0.1:{self.ports['a']}",
			"redis_queue_sentinel_enabled": 1,
			"redis_queue_sentinels": [f"127.0.0.1:{port}" for port in self.sentinel_ports],
			"redis_queue_master_service": SERVICE,
		}

	# -- faults ------------------------------------------------------------------------

	def kill_master(self) -> str:
		"""SIGKILL the master; its name ("a" or "b")."""
		name = self.master_name()
		self.processes[name].send_signal(signal.SIGKILL)
		self.processes[name].wait()
		return name

	def wait_for_promotion(self, old: str, timeout: float = 30) -> float:
		"""Seconds until the sentinels name the other server master."""
		started = time.monotonic()
		self.wait(lambda: self.master_name() != old, timeout, "the sentinels promoted the replica")
		return time.monotonic() - started

	def restart(self, name: str) -> None:
		"""Start a killed server again, as a replica of the current master (sentinel would reconfigure it anyway)."""
		self.start_server(name, replica_of=self.master()[1], same_port=True)

	# -- helpers -------------------------------------------------------------------------

	def client(self, port: int, password: str | None = None) -> redis.Redis:
		if password is None:
			password = self.sentinel_password if port in self.sentinel_ports else self.master_password
		return redis.Redis(host="127.0.0.1", port=port, password=password, socket_timeout=2, socket_connect_timeout=2)

	@staticmethod
	def wait(predicate, timeout: float, what: str) -> None:
		deadline = time.monotonic() + patient(timeout)
		while time.monotonic() < deadline:
			try:
				if predicate():
					return
			except (redis.RedisError, RuntimeError, StopIteration):
				pass
			time.sleep(0.05)
		raise RuntimeError(f"timed out after {patient(timeout)} s waiting until {what}")
