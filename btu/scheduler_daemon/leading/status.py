"""The scheduler's status: who leads, and per site what is scheduled and what fired.

`build` reads it live from Redis (for `btu-scheduler status`); the leader
also keeps it under `Keys.status` (`publish`) for the Desk, adding
what only its reconciler knows: paused sites and unreachable databases.
"""

from __future__ import annotations

import json
import logging
import os
import socket
import time
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import TYPE_CHECKING

from btu.scheduler_daemon.log import log_event
from btu.scheduler_daemon.reads.bench import Bench, BenchError
from btu.scheduler_daemon.store.state import Prepared, is_wrong_type
from btu.scheduler_daemon.store.state import text as _text
from btu.shared.instants import from_ms, slot_text
from btu.shared.keys import FRAPPE_JOBS_ACK_TTL_SECONDS, Keys, parse_due_member
from btu.shared.liveness import Reader, benches_sharing, leader, processes, sharing_message, site_sample
from btu.shared.run_kind import RunKey, RunKind

if TYPE_CHECKING:
	from btu.scheduler_daemon.reconcile.site_health import Health

logger = logging.getLogger("btu.scheduler")
# A process's bench as its heartbeat shows it is read again this often (every site's config: rare, as a bench's
# sites seldom change and only an overlap of samples is needed), and the live processes' benches compared this
# often: a Redis shared without namespaces is reported within a minute.
IDENTITY_SECONDS = 600.0
SHARING_CHECK_SECONDS = 30.0

STATUS_SCAN = 2000
STATUS_PAGE = 100
STATUS_SITES_PER_ROUND_TRIP = 200
# The published status is built every PUBLISH_SECONDS by the leader, whatever the number of sites: at 1,000 sites with
# 20 recent fires each it cost 0.2 s of CPU and 4.2 MB; with 5, 0.075 s and 1.2 MB.
PUBLISHED_FIRES = 5
PUBLISH_SECONDS = 60.0
REBUILD_SECONDS = 600.0


def iso(ms: int | float | None) -> str | None:
	try:
		return slot_text(from_ms(int(ms))) if ms else None
	except (TypeError, ValueError, OverflowError):
		return None


@dataclass(frozen=True)
class Acks:
	"""The leader's acks that it fires sites' Frappe Scheduled Job Types (`Keys.frappe_jobs_ack_key`)."""

	keys: frozenset[str]  # written again, each with the lease token as value and `ttl_secs` to live
	dropped: frozenset[str]  # written before and not fired now: deleted, so Frappe's tick fires them at once
	token: str
	ttl_secs: int


class SharedRedisWatch:
	"""Which bench this process serves, as its heartbeat says, and whether other benches' schedulers write under the
	same key names (one Redis, no namespaces): logged once when it starts and once when it ends, shown by `status`
	and the Desk from the heartbeats themselves."""

	def __init__(self, bench_path, keys: Keys):
		self.bench_path = bench_path
		self.keys = keys
		self.identity: dict = {}
		self.identity_until = 0.0
		self.sharing: list[dict] = []
		self.next_check = 0.0

	def bench(self) -> dict:
		"""{id, path, namespace, sites}: its sites' databases (`liveness.site_sample`), read every IDENTITY_SECONDS."""
		if time.monotonic() >= self.identity_until:
			self.identity_until = time.monotonic() + IDENTITY_SECONDS
			try:
				bench = Bench.load(self.bench_path)
			except BenchError:
				return self.identity  # being edited: the last one read stands until the next read
			databases = []
			for name in bench.site_names():
				try:
					params = bench.site(name).db_params
				except (BenchError, TypeError, ValueError):
					continue
				databases.append(f"{params['socket'] or params['host']}:{params['port']}|{params['database']}")
			self.identity = {
				"id": bench.bench_id,
				"path": str(bench.path),
				"namespace": self.keys.namespace,
				"sites": site_sample(databases),
			}
		return self.identity

	def check(self, redis_conn) -> None:
		"""Every SHARING_CHECK_SECONDS: read the live processes' benches and log a change of who shares the keys."""
		if time.monotonic() < self.next_check:
			return
		self.next_check = time.monotonic() + SHARING_CHECK_SECONDS
		sharing = benches_sharing(processes(redis_conn, self.keys))
		if sharing and sharing != self.sharing:
			log_event(logger, logging.ERROR, "redis_shared", benches=len(sharing), error=sharing_message(sharing))
		elif self.sharing and not sharing:
			log_event(
				logger,
				logging.INFO,
				"redis_shared_ended",
				effect="only this bench's schedulers write under its key names",
			)
		self.sharing = sharing


class FrappeJobAcks:
	"""A leader's acknowledgements: refreshed with each heartbeat, and only its own deleted, only while its lease is
	valid (once it is not, a new leader may have written the same keys: they are left to expire)."""

	def __init__(self, lease_ttl_secs: float):
		self.written: frozenset[str] = frozenset()
		# Outlives the refresh (each heartbeat, at most a third of the lease apart) as the heartbeat's own TTL does.
		self.ttl_secs = int(max(FRAPPE_JOBS_ACK_TTL_SECONDS, lease_ttl_secs * 3))

	def next(self, keys: frozenset[str], lease) -> Acks:
		"""What this heartbeat writes (`keys`) and deletes (written before, not now); nothing without a valid lease."""
		if not lease.valid():
			self.written = frozenset()
			return Acks(frozenset(), frozenset(), "", self.ttl_secs)
		acks = Acks(keys, self.written - keys, lease.value, self.ttl_secs)
		self.written = keys
		return acks

	def drop(self, redis_conn, lease) -> None:
		"""A leader stepping down, before it releases the lease: Frappe's next tick fires those sites' jobs."""
		if lease.valid() and self.written:
			redis_conn.delete(*sorted(self.written))
		self.written = frozenset()

	def forget(self) -> None:
		"""The lease was lost: the keys may be the new leader's now."""
		self.written = frozenset()


def write_heartbeat(
	redis_conn,
	keys: Keys,
	process_id: str,
	*,
	role: str,
	started_at: datetime,
	leader_since,
	ttl_secs: float,
	redis: dict | None = None,
	metrics: dict | None = None,
	databases: list[dict] | None = None,
	acks: Acks | None = None,
	bench: dict | None = None,
	kind: str = "dedicated",
	worker_pid: int | None = None,
) -> None:
	"""`redis`: the master the process writes to and its replicas (`Replication.describe`); `metrics`: its figures
	(`Metrics.summary`); `databases`: its connections per database server (`Connections.snapshot`: open, idle, peak,
	limit, waits); `acks`: a leader's acknowledgements, written in the heartbeat's round trip however many sites there
	are; `bench`: which bench the process serves ({id, path, namespace, sites}: `liveness.benches_sharing` tells benches
	apart); `kind`: a dedicated scheduler or a worker's candidate (`liveness.KINDS`), whose worker is `worker_pid`."""
	now = datetime.now(timezone.utc)
	info = {
		**(redis or {}),
		"id": process_id,
		"host": socket.gethostname(),
		"pid": os.getpid(),
		"role": role,
		"kind": kind,
		"worker_pid": worker_pid,
		"started_at": slot_text(started_at),
		"leader_since": slot_text(leader_since) if leader_since else None,
		"heartbeat_at": slot_text(now),
		"metrics": metrics or {},
		"databases": databases or [],
		"bench": bench or {},
	}
	with redis_conn.pipeline(transaction=False) as pipe:
		pipe.set(keys.process_key(process_id), json.dumps(info), ex=int(ttl_secs))
		pipe.zadd(keys.processes, {process_id: now.timestamp() * 1000})
		pipe.zremrangebyscore(keys.processes, "-inf", (now.timestamp() - 24 * 3600) * 1000)
		if acks is not None:
			for key in sorted(acks.keys):
				pipe.set(key, acks.token, ex=acks.ttl_secs)
			if acks.dropped:
				pipe.delete(*sorted(acks.dropped))
		results = pipe.execute(raise_on_error=False)
	if any(is_wrong_type(result) for result in results):
		# Only a report: the next heartbeat writes a fresh set.
		redis_conn.delete(keys.processes)
	for result in results:
		if isinstance(result, Exception) and not is_wrong_type(result):
			raise result


def forget_process(redis_conn, keys: Keys, process_id: str) -> None:
	"""Take a stopping process out of the process list, so nothing reads it as alive (or as leader) until its
	heartbeat expires: the Desk's panel, `status`, and the Desk's announcements (sent only while a scheduler is
	alive)."""
	with redis_conn.pipeline(transaction=False) as pipe:
		pipe.delete(keys.process_key(process_id))
		pipe.zrem(keys.processes, process_id)
		pipe.execute(raise_on_error=False)


def build(redis_conn, keys: Keys, *, recent: int = 20, next_n: int = 10, health: dict | None = None) -> dict:
	"""The status as JSON-ready data; a wrong value in the state is listed under "problems", never raised."""
	reader = Reader(redis_conn)
	return {
		**live_part(redis_conn, keys, reader),
		"sites": sites_part(redis_conn, keys, reader, recent, next_n, health),
		"problems": reader.problems,
	}


def live_part(redis_conn, keys: Keys, reader: Reader) -> dict:
	"""What a status says beside its sites: the time, who leads, the processes and what is moved aside."""
	live = processes(redis_conn, keys, reader)
	return {
		"updated_at": iso(int(datetime.now(timezone.utc).timestamp() * 1000)),
		"leader": leader(redis_conn, keys, reader),
		"processes": live,
		"shared_redis": benches_sharing(live),
		"quarantine": quarantine(redis_conn, keys, reader),
	}


def sites_part(
	redis_conn, keys: Keys, reader: Reader, recent: int, next_n: int, health: dict | None
) -> dict[str, dict]:
	"""Per site: its schedules, run requests, invalid rows, counters, recent and next fires, and `health`'s say."""
	now_ms = int(datetime.now(timezone.utc).timestamp() * 1000)
	# A site that could not be read or reached since start is not in the state yet; it is listed all the same.
	stored_sites = reader.read(keys.sites, lambda: redis_conn.smembers(keys.sites), set())
	sites = sorted({_text(s) for s in stored_sites} | set(health or {}))
	per_site = {site: {"next_fires": [], "oldest_overdue_ms": None} for site in sites}
	for site, (count, invalid, counters, fires, first_page) in site_reads(reader, keys, sites, recent):
		entry = per_site[site]
		entry["schedules"] = count or 0
		entry["run_requests"] = run_request_count(redis_conn, keys, site, reader, first_page)
		entry["invalid"] = {_text(k): _text(v) for k, v in (invalid or {}).items()}
		entry["counters"] = {}
		for k, v in (counters or {}).items():
			try:
				entry["counters"][_text(k)] = int(v)
			except ValueError:
				reader.note(f"{keys.counters_key(site)} {_text(k)}", f"{_text(v)!r:.100} is not a number")
		records = [reader.json(keys.recent_fires_key(site), f) for f in fires or []]
		entry["recent_fires"] = [_fire(record) for record in records if isinstance(record, dict)]
		entry.update((health or {}).get(site, {}))
	wanted = {site: min(next_n, entry["schedules"]) for site, entry in per_site.items()}
	for (site, schedule), score in soonest_fires(redis_conn, keys, wanted, reader):
		entry = per_site.get(site)
		if entry is None:
			continue
		if score < now_ms and entry["oldest_overdue_ms"] is None:
			entry["oldest_overdue_ms"] = now_ms - int(score)
		if len(entry["next_fires"]) < next_n:
			entry["next_fires"].append({"schedule": schedule, "fire_at": iso(score)})
	return per_site


def site_reads(reader: Reader, keys: Keys, sites: list[str], recent: int):
	"""(site, [schedule count, invalid rows, counters, recent fires, first page of its run requests' states]) for each
	site, STATUS_SITES_PER_ROUND_TRIP sites per pipeline: a status of a thousand sites costs a few round trips."""
	for start in range(0, len(sites), STATUS_SITES_PER_ROUND_TRIP):
		page = sites[start : start + STATUS_SITES_PER_ROUND_TRIP]
		reads = []
		for site in page:
			reads += [
				(keys.site_schedules_key(site), "scard", ()),
				(keys.invalid_rows_key(site), "hgetall", ()),
				(keys.counters_key(site), "hgetall", ()),
				(keys.recent_fires_key(site), "lrange", (0, recent - 1)),
				(keys.site_schedules_key(site), "sscan", (0, RunKey.match(RunKind.RUN_REQUEST), STATUS_PAGE)),
			]
		results = reader.many(reads, None)
		for index, site in enumerate(page):
			yield site, results[index * 5 : index * 5 + 5]


def run_request_count(redis_conn, keys: Keys, site: str, reader: Reader, first_page) -> int:
	"""How many of the site's states are run requests (retries, backfilled slots, chained runs not fired yet or not yet
	done), counted among at most STATUS_SCAN of its states; `first_page` is the first SSCAN's reply, read with the
	site's other figures (None when its set held a wrong value, noted)."""
	if first_page is None:
		return 0
	key = keys.site_schedules_key(site)

	def count() -> int:
		cursor, page = first_page
		found, looked = len(page), STATUS_PAGE
		while int(cursor) and looked < STATUS_SCAN:
			cursor, page = redis_conn.sscan(key, cursor, match=RunKey.match(RunKind.RUN_REQUEST), count=STATUS_PAGE)
			found += len(page)
			looked += STATUS_PAGE
		return found

	return reader.read(key, count, 0)


def quarantine(redis_conn, keys: Keys, reader: Reader) -> dict[str, dict]:
	"""What the scheduler moved aside (lua/guard.lua): key or member -> {reason, at, detail}."""
	entries = reader.read(keys.quarantine, lambda: redis_conn.hgetall(keys.quarantine), {})
	out = {}
	for what, value in entries.items():
		record = reader.json(keys.quarantine, value, {})
		if isinstance(record, dict):
			out[_text(what)] = {
				"reason": record.get("reason"),
				"at": iso(record.get("at_ms")),
				"detail": record.get("detail"),
			}
	return out


def soonest_fires(
	redis_conn, keys: Keys, wanted: dict[str, int], reader: Reader | None = None
) -> list[tuple[tuple[str, str], float]]:
	"""((site, schedule), fire ms) from the head of the prepared set (written, queued at their moment),
	then of the due set, soonest first: a page at a time until every site has as many as `wanted`
	says, and at most STATUS_SCAN of each set, so that neither a status nor an idle leader reads
	100,000 entries. A member that is not one BTU writes is noted and passed over."""
	reader = reader or Reader(redis_conn)
	found: list[tuple[tuple[str, str], float]] = []
	missing = {site: n for site, n in wanted.items() if n > 0}
	for key, target in (
		(keys.prepared, lambda m: Prepared.parse(m).target),
		(keys.due, parse_due_member),
	):
		for start in range(0, STATUS_SCAN, STATUS_PAGE):
			page = reader.read(key, lambda: redis_conn.zrange(key, start, start + STATUS_PAGE - 1, withscores=True), [])
			for member, score in page:
				try:
					site_schedule = target(member)
				except ValueError as exc:
					reader.note(key, exc)
					continue
				found.append((site_schedule, score))
				if missing.get(site_schedule[0], 0) > 0:
					missing[site_schedule[0]] -= 1
					if not missing[site_schedule[0]]:
						del missing[site_schedule[0]]
			if len(page) < STATUS_PAGE or not missing:
				break
	return sorted(found, key=lambda pair: pair[1])


def _fire(fire: dict) -> dict:
	return {
		"schedule": fire.get("schedule"),
		"slot": iso(fire.get("slot_ms")),
		"enqueued_at": iso(fire.get("enqueued_ms")),
		"lag_ms": fire.get("lag_ms"),
		"job_id": fire.get("job_id"),
		"outcome": fire.get("outcome"),
	}


def site_health(health: Health) -> dict[str, dict[str, str]]:
	"""The reconciler's health as the status fields of each site it concerns."""
	by_site: dict[str, dict[str, str]] = {}
	for site, reason in health.paused.items():
		by_site.setdefault(site, {})["paused_reason"] = reason
	for site in health.unreachable:
		by_site.setdefault(site, {})["database"] = "unreachable"
	for site, error in health.unreadable.items():
		by_site.setdefault(site, {})["site_config"] = f"unreadable: {error}"
	return by_site


class Publisher:
	"""The leader's status under `Keys.status`, for the Desk: PUBLISHED_FIRES recent and next fires a site (the
	Desk shows its own site's; `btu-scheduler status` reads every figure live) and the reconciler's site health.

	The sites' part is read again only when the state changed since (`State.changes`), the health did, a fire was
	overdue (its age grows) or REBUILD_SECONDS passed (a write by another process); else the last one is published with
	the time, the leader and the processes read anew. At a thousand sites reading it was a fifth of an idle leader's
	CPU, for a document that had not changed."""

	def __init__(self, keys: Keys):
		self.keys = keys
		self.sites: dict[str, dict] | None = None
		self.problems: list = []
		self.seen: tuple[int, dict] | None = None
		self.read_at = 0.0

	def publish(self, redis_conn, health: Health, changes: int) -> None:
		"""Publish the status; `health` is the reconciler's, `changes` the state's count of its own writes."""
		health = site_health(health)
		seen = (changes, health)
		reader = Reader(redis_conn)
		if (
			self.sites is None
			or seen != self.seen
			or self.overdue()
			or time.monotonic() >= self.read_at + REBUILD_SECONDS
		):
			self.sites = sites_part(redis_conn, self.keys, reader, PUBLISHED_FIRES, PUBLISHED_FIRES, health)
			self.problems, reader.problems = reader.problems, []
			self.seen, self.read_at = seen, time.monotonic()
		document = {
			**live_part(redis_conn, self.keys, reader),
			"sites": self.sites,
			"problems": self.problems + reader.problems,
		}
		redis_conn.set(self.keys.status, json.dumps(document))

	def overdue(self) -> bool:
		return any(entry["oldest_overdue_ms"] is not None for entry in (self.sites or {}).values())


def stored_health(redis_conn, keys: Keys) -> dict:
	"""Site health as the leader last published it."""
	reader = Reader(redis_conn)
	stored = reader.read(keys.status, lambda: redis_conn.get(keys.status), None)
	published = reader.json(keys.status, stored, {}) if stored else {}
	sites = published.get("sites", {}) if isinstance(published, dict) else {}
	# Only the sites with something to say: a site listed then only because it was in the state would outlive its drop
	# until the next publication (a minute).
	health = {
		site: {k: v for k, v in entry.items() if k in ("paused_reason", "database", "site_config")}
		for site, entry in sites.items()
		if isinstance(entry, dict)
	}
	return {site: fields for site, fields in health.items() if fields}
