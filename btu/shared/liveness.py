"""Who is alive: the leader lease and each scheduler process's heartbeat, read live from Redis.

Both halves read them here: `btu-scheduler status` (with the rest of the
status) and the Desk's status panel, so a heartbeat shown is never older than
the process's heartbeat interval, whatever the published status's age. A
wrong value in Redis never raises: `Reader` notes it under `problems`.
"""

from __future__ import annotations

import json

import redis

from btu.shared.keys import NAMESPACE_SETTING, Keys
from btu.shared.redis_refusals import is_denied

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
			if is_denied(exc):  # a missing grant is not a value to report
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
			if isinstance(result, redis.ResponseError) and not is_denied(result):
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


# What runs a scheduler process: `btu-scheduler run` on its own, or a Frappe worker's candidate (its heartbeat's
# "kind"; an older scheduler's heartbeat has none: dedicated).
DEDICATED, WORKER = "dedicated", "worker"
KINDS = (DEDICATED, WORKER)


def processes(redis_conn, keys: Keys, reader: Reader | None = None) -> list[dict]:
	reader = reader or Reader(redis_conn)
	ids = [_text(i) for i in reader.read(keys.processes, lambda: redis_conn.zrevrange(keys.processes, 0, 50), [])]
	if not ids:
		return []
	values = reader.many([(keys.process_key(i), "get", ()) for i in ids], None)
	infos = [reader.json(keys.process_key(i), v) for i, v in zip(ids, values) if v]
	return [info for info in infos if isinstance(info, dict)]


def leader(redis_conn, keys: Keys, reader: Reader | None = None) -> dict | None:
	reader = reader or Reader(redis_conn)
	value, pttl = reader.many([(keys.leader, "get", ()), (keys.leader, "pttl", ())], None)
	value = _text(value)
	if not value:
		return None
	epoch, _, holder = value.partition("|")
	if not epoch.isdigit() or not holder:
		reader.note(
			keys.leader,
			f"{value!r:.200} is not a lease (<epoch>|<holder>); the next scheduler to start moves it aside",
		)
		return None
	info = {"holder": holder, "epoch": int(epoch), "token": value, "lease_ms_left": pttl}
	[process] = reader.many([(keys.process_key(holder), "get", ())], None)
	process = reader.json(keys.process_key(holder), process) if process else None
	if isinstance(process, dict):
		info.update({k: process.get(k) for k in ("host", "pid", "heartbeat_at")})
		info["kind"] = process.get("kind") or DEDICATED
		info["worker_pid"] = process.get("worker_pid")
		info["since"] = process.get("leader_since")
	return info


# -- benches sharing one Redis ----------------------------------------------------------------

# How many of its sites' digests a process's heartbeat carries (the smallest, so two processes of one bench
# carry the same ones however many sites it has, and one site added on one host only first still overlaps).
SITE_SAMPLE = 16


def site_sample(databases: list[str]) -> list[str]:
	"""The heartbeat's sample of a bench's sites, from "<server>|<database>" of each: two benches never share a database
	(same-named sites in two benches have two), two processes of one bench share theirs."""
	import hashlib

	return sorted(hashlib.sha1(text.encode()).hexdigest()[:12] for text in set(databases))[:SITE_SAMPLE]


def same_bench(one: dict, other: dict) -> bool:
	"""Whether two heartbeats' `bench` entries are one bench: their site samples overlap, or, with no sites, their id
	and path match."""
	if one.get("sites") or other.get("sites"):
		return bool(set(one.get("sites") or ()) & set(other.get("sites") or ()))
	return (one.get("id"), one.get("path")) == (other.get("id"), other.get("path"))


def benches_sharing(processes: list[dict]) -> list[dict]:
	"""The benches whose scheduler processes write under one set of key names (one Redis, one namespace), when more
	than one does: each {id, path, hosts, namespace}. Empty when all live processes are of one bench."""
	groups: list[tuple[dict, set[str]]] = []
	for process in processes:
		bench = process.get("bench")
		if not isinstance(bench, dict):
			continue
		for known, hosts in groups:
			if same_bench(known, bench):
				hosts.add(str(process.get("host")))
				break
		else:
			groups.append((bench, {str(process.get("host"))}))
	if len(groups) < 2:
		return []
	found = [
		{"id": bench.get("id"), "path": bench.get("path"), "namespace": bench.get("namespace"), "hosts": sorted(hosts)}
		for bench, hosts in groups
	]
	return sorted(found, key=lambda bench: (str(bench["path"]), str(bench["id"])))


def sharing_message(benches: list[dict]) -> str:
	"""One line for an operator: which benches share BTU's keys, and the fix."""
	names = "; ".join(f"{b['path']} (bench_id {b['id']}, on {', '.join(b['hosts'])})" for b in benches)
	return (
		f"{len(benches)} benches run BTU schedulers on this Redis under the same key names: {names}. "
		"They share one leader lease, so only the leader's bench fires, and it takes the other bench's sites for gone. "
		f"Give each bench its own {NAMESPACE_SETTING} in its common_site_config.json "
		"(for example its bench id) and restart its schedulers and workers"
	)
