"""Redis Sentinel, configured with the keys Frappe's queue connection reads.

`frappe.utils.redis_queue.RedisQueue.get_connection` (v15 and v16): with
`redis_queue_sentinel_enabled` it asks `redis_queue_sentinels` ("host:port"
each) for the master of `redis_queue_master_service` and ignores the
`redis_queue` URL; the sentinels' own user and password are
`redis_queue_sentinel_username` / `_password`, the master's
`redis_queue_master_username` / `_password`, which default to the bench's
queue credentials (`use_rq_auth`). BTU reads the same keys from
common_site_config.json (the scheduler serves the whole bench), and a
connection made here follows a master switch by itself: redis-py's
`SentinelConnectionPool` asks the sentinels again whenever a connection
fails or the old master, demoted, answers READONLY.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from btu.shared.task_args import json_type

ENABLED = "redis_queue_sentinel_enabled"
SENTINELS = "redis_queue_sentinels"
SERVICE = "redis_queue_master_service"
KEYS = (
	ENABLED,
	SENTINELS,
	SERVICE,
	"redis_queue_sentinel_username",
	"redis_queue_sentinel_password",
	"redis_queue_master_username",
	"redis_queue_master_password",
)


class SentinelConfigError(ValueError):
	"""A Sentinel key of common_site_config.json that cannot work; the message names it and the fix."""


@dataclass(frozen=True)
class SentinelSettings:
	sentinels: tuple[tuple[str, int], ...]
	service: str
	sentinel_username: str | None = None
	sentinel_password: str | None = None
	master_username: str | None = None  # None: the bench's queue credentials
	master_password: str | None = None

	@classmethod
	def from_config(cls, conf: dict, path: Path | str) -> SentinelSettings | None:
		"""The settings when `redis_queue_sentinel_enabled` is on, else None; refuses values Frappe would fail on."""
		if not conf.get(ENABLED):
			return None
		nodes = conf.get(SENTINELS)
		example = '["10.0.0.1:26379", "10.0.0.2:26379", "10.0.0.3:26379"]'
		if not isinstance(nodes, list) or not nodes:
			raise SentinelConfigError(
				f'{path}: {SENTINELS} must be a list of "host:port" such as {example}, '
				f"found {json_type(nodes)}; fix the file or turn {ENABLED} off"
			)
		sentinels = tuple(parse_node(node, path) for node in nodes)
		service = conf.get(SERVICE)
		if not isinstance(service, str) or not service.strip():
			raise SentinelConfigError(
				f"{path}: {SERVICE} must name the master's service as the sentinels know it "
				f"(sentinel monitor NAME ...), found {service!r}; fix the file"
			)
		text = {key: optional_text(conf, key, path) for key in KEYS[3:]}
		return cls(
			sentinels, service, text["redis_queue_sentinel_username"], text["redis_queue_sentinel_password"],
			text["redis_queue_master_username"], text["redis_queue_master_password"],
		)  # fmt: skip

	def describe(self) -> str:
		"""How the connection is found, for logs and status: no password in it."""
		return f"sentinel service {self.service!r} via {', '.join(f'{host}:{port}' for host, port in self.sentinels)}"

	def sentinel(self, **options):
		from redis.sentinel import Sentinel

		sentinel_kwargs = {
			key: value
			for key, value in (("username", self.sentinel_username), ("password", self.sentinel_password))
			if value
		}
		for option in ("socket_timeout", "socket_connect_timeout"):
			if options.get(option) is not None:
				sentinel_kwargs[option] = options[option]
		return Sentinel(list(self.sentinels), sentinel_kwargs=sentinel_kwargs)

	def master_url(self, **options) -> str:
		"""The current master as a redis:// URL (no user), asked of the sentinels now; MasterNotFoundError if none
		knows."""
		host, port = self.sentinel(**options).discover_master(self.service)
		return f"redis://{'[' + host + ']' if ':' in host else host}:{port}/0"

	def connect(self, credentials: dict, **options):
		"""A client of the current master (`credentials`: the bench's queue user), following a switch by itself."""
		master = {
			"username": self.master_username if self.master_username is not None else credentials.get("username"),
			"password": self.master_password if self.master_password is not None else credentials.get("password"),
		}
		return self.sentinel(**options).master_for(
			self.service, **{k: v for k, v in {**master, **options}.items() if v is not None}
		)


def parse_node(node, path) -> tuple[str, int]:
	"""One "host:port" of the sentinel list (Frappe splits on ":"; an IPv6 host goes in brackets here)."""
	if isinstance(node, str):
		host, _, port = node.strip().rpartition(":")
		host = host.removeprefix("[").removesuffix("]")
		if host and port.isdigit() and 0 < int(port) < 65536:
			return host, int(port)
	raise SentinelConfigError(
		f'{path}: {SENTINELS} entry {node!r} is not "host:port" (port 1-65535), e.g. "10.0.0.1:26379"; fix the file'
	)


def optional_text(conf: dict, key: str, path) -> str | None:
	value = conf.get(key)
	if value in (None, ""):
		return None
	if not isinstance(value, str):
		raise SentinelConfigError(f"{path}: {key} must be text, found {json_type(value)}; fix the file")
	return value


def pubsub_client(client):
	"""`client`, or for a Sentinel client a plain one to the master it finds now: redis-py 4.5's Sentinel
	connections cannot read pub/sub replies (redis-py #2754, fixed in 4.6; Frappe v15 pins 4.5.5). A
	subscriber that loses that master reconnects through here and finds the new one."""
	import redis

	pool = client.connection_pool
	if getattr(pool, "service_name", None) is None:
		return client
	host, port = pool.get_master_address()
	# connection_kwargs holds the Sentinel pool itself, for its managed connections: not for a plain one.
	kwargs = {key: value for key, value in pool.connection_kwargs.items() if key != "connection_pool"}
	return redis.Redis(connection_pool=redis.ConnectionPool(host=host, port=port, **kwargs))
