"""What BTU needs of a Redis ACL user, on top of the one `bench create-rq-users` makes.

Frappe's user may touch the keys ``rq:[^q]*``, ``rq:queues`` and
``rq:queue:<bench_id>:*`` and, on Redis 7, no pub/sub channel. BTU also needs
its own keys (``btu:*``), its two channels and the commands its Lua scripts
run. `rules` lists every grant, `setuser_line` writes them as one ACL SETUSER
line (additive: it removes nothing the user has), `probe` finds the first one
a connection lacks by commands that change nothing (ACL DRYRUN is an admin
command the user itself may not run), and `Access` reports a refusal that
appears while running once per change.
"""

from __future__ import annotations

import logging
import re
import threading
import uuid

import redis

from btu.scheduler_daemon.log import log_event
from btu.shared.keys import Keys
from btu.shared.redis_refusals import denied_message, is_auth_failure, is_denied, redis_user
from btu.shared.sentinel import pubsub_client

logger = logging.getLogger("btu.scheduler")


def channel_names(keys: Keys) -> tuple[str, str]:
	return (keys.wake_channel, keys.handoff_channel)


# Every command the scheduler, the Desk (btu.btu_core.scheduler_link) and `btu-scheduler
# status/ping/resync` send, and those the Lua scripts run (Redis checks those too), found by
# running them under a user with `-@all` plus this list (tests/reliability/test_redis_acl.py).
COMMANDS = (
	# connections: redis-py's health check, a database other than 0
	"ping",
	"select",
	# the Lua scripts: loaded (pipelines check first), run, and what they call
	"evalsha",
	"script|load",
	"script|exists",
	"time",
	# strings and keys
	"get",
	"set",
	"mget",
	"del",
	"exists",
	"expire",
	"pexpire",
	"pttl",
	"incr",
	# moving a key that holds a wrong value aside (lua/guard.lua) and checking types (State.check_types)
	"type",
	"rename",
	# hashes
	"hget",
	"hset",
	"hmget",
	"hgetall",
	"hkeys",
	"hdel",
	"hincrby",
	"hlen",
	# sets
	"sadd",
	"srem",
	"smembers",
	"scard",
	"sismember",
	"spop",
	"sscan",
	# sorted sets
	"zadd",
	"zrem",
	"zcard",
	"zcount",
	"zscore",
	"zrange",
	"zrevrange",
	"zrangebyscore",
	"zremrangebyscore",
	"zremrangebyrank",
	# lists: RPC commands and replies, recent fires, rq's queues
	"lpush",
	"rpush",
	"rpop",
	"brpop",
	"blpop",
	"lrange",
	"ltrim",
	# transactions and pub/sub
	"multi",
	"exec",
	"discard",
	"publish",
	"subscribe",
	"unsubscribe",
	# replication: how many replicas are connected, and waiting for them to hold the fire writes
	"info",
	"wait",
)
PROBE_NAME = "btu-acl-probe"  # a name BTU never gives a key; deleting it changes nothing
PROBE_SCRIPT = "return redis.call('TIME')"
COMMAND_REFUSED = re.compile(r"run the '([^']+)' command")


def key_patterns(keys: Keys, bench_id: str) -> tuple[str, ...]:
	"""BTU's keys (the bench's own: `Keys.grant`), then the rq keys the fire scripts write: job hashes, rq's set of
	queues, the bench's queues."""
	return (keys.grant, "~rq:job:*", "~rq:queues", f"~rq:queue:{bench_id}:*")


def rules(keys: Keys, bench_id: str, channels: bool = True) -> list[str]:
	"""Every ACL rule BTU needs; `channels=False` for Redis 6.0, which has no channel rules."""
	found = list(key_patterns(keys, bench_id))
	if channels:
		found += [f"&{channel}" for channel in channel_names(keys)]
	return found + [f"+{command}" for command in COMMANDS]


def setuser_line(user: str, keys: Keys, bench_id: str, channels: bool = True) -> str:
	return " ".join(["ACL", "SETUSER", user, *rules(keys, bench_id, channels)])


def probes(keys: Keys, bench_id: str):
	"""(grant, attempt) pairs: each attempt is refused exactly when the grant is missing, and changes nothing."""
	probe_key = f"{PROBE_NAME}:{uuid.uuid4().hex}"

	def subscribe(channel: str):
		def attempt(client: redis.Redis) -> None:
			pubsub = pubsub_client(client).pubsub()
			try:
				pubsub.subscribe(channel)
				pubsub.get_message(timeout=1)  # the refusal, if any, is the reply to SUBSCRIBE
			finally:
				pubsub.close()

		return attempt

	def script(client: redis.Redis) -> None:
		client.evalsha(client.script_load(PROBE_SCRIPT), 0)

	return [
		(keys.grant, lambda client: client.delete(f"{keys.prefix}{probe_key}")),
		("~rq:job:*", lambda client: client.delete(f"rq:job:{probe_key}")),
		("~rq:queues", lambda client: client.srem("rq:queues", probe_key)),
		(f"~rq:queue:{bench_id}:*", lambda client: client.delete(f"rq:queue:{bench_id}:{probe_key}")),
		*((f"&{channel}", subscribe(channel)) for channel in channel_names(keys)),
		("+script|load, +evalsha and +time (the Lua scripts)", script),
	]


def probe(client: redis.Redis, keys: Keys, bench_id: str) -> tuple[str, redis.RedisError] | None:
	"""The first grant `client`'s user lacks and Redis's refusal, or None when it has them all.

	Raises whatever else Redis raises (down, loading): that is not for this check to judge."""
	for grant, attempt in probes(keys, bench_id):
		try:
			attempt(client)
		except redis.RedisError as exc:
			if is_denied(exc):
				return grant, exc
			raise
	return None


def missing_grant(client: redis.Redis, keys: Keys, bench_id: str, exc: BaseException) -> str:
	"""One line for a refusal `exc`: the grant it is about (probed again: Redis names none for a key), and the fix."""
	named = COMMAND_REFUSED.search(str(exc))
	grant = f"+{named.group(1)}" if named else "a command its Lua scripts run"
	if not is_auth_failure(exc):
		try:
			found = probe(client, keys, bench_id)
		except redis.RedisError:
			found = None
		if found:
			grant, exc = found
	return denied_message(exc, redis_user(client), grant)


def check(client: redis.Redis, keys: Keys, bench_id: str) -> str | None:
	"""Before serving: None when `client`'s user has every grant (or Redis is not answering: the
	scheduler waits for it), else one line naming the missing grant and the fix. Closes `client`."""
	try:
		found = probe(client, keys, bench_id)
	except redis.RedisError as exc:
		if is_denied(exc):  # WRONGPASS / NOAUTH on connecting
			return denied_message(exc, redis_user(client), keys.grant)
		return None
	finally:
		client.close()
	if found is None:
		return None
	grant, exc = found
	return denied_message(exc, redis_user(client), grant)


class Access:
	"""Redis refusing the scheduler's user while it runs: logged once per change, never fatal."""

	def __init__(self, client: redis.Redis, keys: Keys, bench_id: str, process_id: str, where: str):
		self.client = client
		self.keys = keys
		self.bench_id = bench_id
		self.process_id = process_id
		self.where = where  # each loop reports its own refusals, so one's success does not hide another's
		self.lock = threading.Lock()
		self.reason: str | None = None

	def denied(self, exc: BaseException) -> None:
		reason = missing_grant(self.client, self.keys, self.bench_id, exc)
		with self.lock:
			if reason == self.reason:
				return
			self.reason = reason
		log_event(
			logger,
			logging.ERROR,
			"redis_permission_denied",
			process=self.process_id,
			where=self.where,
			error=reason,
			effect="retrying; missed fires follow each schedule's catch-up policy",
		)

	def ok(self) -> None:
		if self.reason is None:
			return
		with self.lock:
			if self.reason is None:
				return
			self.reason = None
		log_event(logger, logging.INFO, "redis_permission_restored", process=self.process_id, where=self.where)
