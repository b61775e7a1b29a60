"""Who is alive: the leader lease and each scheduler process's heartbeat, read live from Redis.

Both halves read them here: `btu-scheduler status` (with the rest of the
status) and the Desk's status panel, so a heartbeat shown is never older than
the process's heartbeat interval, whatever the published status's age. A
wrong value in Redis never raises: `Reader` notes it under `problems`.
"""

from __future__ import annotations

import json

import redis

from btu.shared import protocol

MAX_PROBLEMS = 100


def _text(value) -> str | None:
	return value.decode("utf-8", "replace") if isinstance(value, bytes) else value


class Reader:
	"""Reads that a wrong value in Redis cannot make fail: each wrong value is noted in `problems` instead.

	Redis not answering, or refusing for want of a grant, still raises: that is not a value to report."""

	def __init__(self, redis_conn):
		self.redis = redis_conn
		self.problems: list[str] = []

	def note(self, what: str, problem) -> None:
		if len(self.problems) < MAX_PROBLEMS:
			self.problems.append(f"{what}: {str(problem)[:300]}")

	def read(self, what: str, read, default):
		try:
			return read()
		except redis.exceptions.NoPermissionError:
			raise  # a missing grant is the caller's one-line refusal, not a wrong value
		except redis.ResponseError as exc:
			if protocol.is_denied(exc):  # a missing grant is not a value to report
				raise
			self.note(what, exc)
			return default

	def many(self, reads: list[tuple[str, str, tuple]], default) -> list:
		"""Pipelined (key, command, args) reads; a failed one gives `default`, noted."""
		with self.redis.pipeline(transaction=False) as pipe:
			for key, command, args in reads:
				getattr(pipe, command)(key, *args)
			results = pipe.execute(raise_on_error=False)
		out = []
		for (key, _, _), result in zip(reads, results):
			if isinstance(result, redis.ResponseError) and not protocol.is_denied(result):
				self.note(key, result)
				result = default
			elif isinstance(result, Exception):
				raise result
			out.append(result)
		return out

	def json(self, what: str, raw, default=None):
		try:
			return json.loads(raw)
		except (TypeError, ValueError):
			self.note(what, f"not JSON: {_text(raw)!r:.200}")
			return default


def processes(redis_conn, reader: Reader | None = None) -> list[dict]:
	reader = reader or Reader(redis_conn)
	ids = [_text(i) for i in reader.read(protocol.PROCESSES_KEY, lambda: redis_conn.zrevrange(protocol.PROCESSES_KEY, 0, 50), [])]
	if not ids:
		return []
	values = reader.many([(protocol.process_key(i), "get", ()) for i in ids], None)
	infos = [reader.json(protocol.process_key(i), v) for i, v in zip(ids, values) if v]
	return [info for info in infos if isinstance(info, dict)]


def leader(redis_conn, reader: Reader | None = None) -> dict | None:
	reader = reader or Reader(redis_conn)
	value, pttl = reader.many([(protocol.LEADER_KEY, "get", ()), (protocol.LEADER_KEY, "pttl", ())], None)
	value = _text(value)
	if not value:
		return None
	epoch, _, holder = value.partition("|")
	if not epoch.isdigit() or not holder:
		reader.note(protocol.LEADER_KEY, f"{value!r:.200} is not a lease (<epoch>|<holder>); the next scheduler to start moves it aside")
		return None
	info = {"holder": holder, "epoch": int(epoch), "token": value, "lease_ms_left": pttl}
	[process] = reader.many([(protocol.process_key(holder), "get", ())], None)
	process = reader.json(protocol.process_key(holder), process) if process else None
	if isinstance(process, dict):
		info.update({k: process.get(k) for k in ("host", "pid", "heartbeat_at")})
		info["since"] = process.get("leader_since")
	return info
