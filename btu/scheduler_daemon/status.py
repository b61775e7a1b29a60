"""The scheduler's status: who leads, and per site what is scheduled and what fired.

`build` reads it live from Redis (for `btu-scheduler status`); the leader
also keeps it under `protocol.STATUS_KEY` (`publish`) for the Desk, adding
what only its reconciler knows: paused sites and unreachable databases.
"""

from __future__ import annotations

import json
import os
import socket
from datetime import datetime, timezone

from btu import protocol
from btu.scheduler_daemon.jobs import slot_text
from btu.scheduler_daemon.reconcile import from_ms
from btu.scheduler_daemon.state import Prepared, text as _text

STATUS_SCAN = 2000
STATUS_PAGE = 100


def iso(ms: int | float | None) -> str | None:
	return slot_text(from_ms(int(ms))) if ms else None


def write_heartbeat(redis_conn, process_id: str, *, role: str, started_at: datetime, leader_since, ttl_secs: float) -> None:
	now = datetime.now(timezone.utc)
	info = {
		"id": process_id,
		"host": socket.gethostname(),
		"pid": os.getpid(),
		"role": role,
		"started_at": slot_text(started_at),
		"leader_since": slot_text(leader_since) if leader_since else None,
		"heartbeat_at": slot_text(now),
	}
	with redis_conn.pipeline() as pipe:
		pipe.set(protocol.process_key(process_id), json.dumps(info), ex=int(ttl_secs))
		pipe.zadd(protocol.PROCESSES_KEY, {process_id: now.timestamp() * 1000})
		pipe.zremrangebyscore(protocol.PROCESSES_KEY, "-inf", (now.timestamp() - 24 * 3600) * 1000)
		pipe.execute()


def processes(redis_conn) -> list[dict]:
	ids = [_text(i) for i in redis_conn.zrevrange(protocol.PROCESSES_KEY, 0, 50)]
	if not ids:
		return []
	values = redis_conn.mget([protocol.process_key(i) for i in ids])
	return [json.loads(v) for v in values if v]


def leader(redis_conn) -> dict | None:
	with redis_conn.pipeline() as pipe:
		value, pttl = pipe.get(protocol.LEADER_KEY).pttl(protocol.LEADER_KEY).execute()
	value = _text(value)
	if not value:
		return None
	epoch, _, holder = value.partition("|")
	info = {"holder": holder, "epoch": int(epoch), "token": value, "lease_ms_left": pttl}
	process = redis_conn.get(protocol.process_key(holder))
	if process:
		process = json.loads(process)
		info.update({k: process.get(k) for k in ("host", "pid", "heartbeat_at")})
		info["since"] = process.get("leader_since")
	return info


def build(redis_conn, *, recent: int = 20, next_n: int = 10, health: dict | None = None) -> dict:
	now_ms = int(datetime.now(timezone.utc).timestamp() * 1000)
	# A site that could not be read or reached since start is not in the state yet; it is listed all the same.
	sites = sorted({_text(s) for s in redis_conn.smembers(protocol.SITES_KEY)} | set(health or {}))
	per_site = {site: {"next_fires": [], "oldest_overdue_ms": None} for site in sites}
	for site in sites:
		entry = per_site[site]
		with redis_conn.pipeline() as pipe:
			pipe.scard(protocol.site_schedules_key(site))
			pipe.hgetall(protocol.invalid_rows_key(site))
			pipe.hgetall(protocol.counters_key(site))
			pipe.lrange(protocol.recent_fires_key(site), 0, recent - 1)
			count, invalid, counters, fires = pipe.execute()
		entry["schedules"] = count
		entry["invalid"] = {_text(k): _text(v) for k, v in invalid.items()}
		entry["counters"] = {_text(k): int(v) for k, v in counters.items()}
		entry["recent_fires"] = [_fire(json.loads(f)) for f in fires]
		entry.update((health or {}).get(site, {}))
	wanted = {site: min(next_n, entry["schedules"]) for site, entry in per_site.items()}
	for (site, schedule), score in soonest_fires(redis_conn, wanted):
		entry = per_site.get(site)
		if entry is None:
			continue
		if score < now_ms and entry["oldest_overdue_ms"] is None:
			entry["oldest_overdue_ms"] = now_ms - int(score)
		if len(entry["next_fires"]) < next_n:
			entry["next_fires"].append({"schedule": schedule, "fire_at": iso(score)})
	return {
		"updated_at": iso(now_ms),
		"leader": leader(redis_conn),
		"processes": processes(redis_conn),
		"sites": per_site,
	}


def soonest_fires(redis_conn, wanted: dict[str, int]) -> list[tuple[tuple[str, str], float]]:
	"""((site, schedule), fire ms) from the head of the prepared set (written, queued at their moment),
	then of the due set, soonest first: a page at a time until every site has as many as `wanted`
	says, and at most STATUS_SCAN of each set, so that neither a status nor an idle leader reads
	100,000 entries."""
	found: list[tuple[tuple[str, str], float]] = []
	missing = {site: n for site, n in wanted.items() if n > 0}
	for key, target in ((protocol.PREPARED_KEY, lambda m: Prepared.parse(m).target), (protocol.DUE_KEY, protocol.parse_due_member)):
		for start in range(0, STATUS_SCAN, STATUS_PAGE):
			page = redis_conn.zrange(key, start, start + STATUS_PAGE - 1, withscores=True)
			for member, score in page:
				site_schedule = target(member)
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


def site_health(reconciler) -> dict:
	health = {}
	for site, reason in reconciler.paused_sites.items():
		health.setdefault(site, {})["paused_reason"] = reason
	for site in reconciler.unreachable:
		health.setdefault(site, {})["database"] = "unreachable"
	for site, error in reconciler.unreadable.items():
		health.setdefault(site, {})["site_config"] = f"unreadable: {error}"
	return health


def publish(redis_conn, reconciler) -> None:
	redis_conn.set(protocol.STATUS_KEY, json.dumps(build(redis_conn, health=site_health(reconciler))))


def stored_health(redis_conn) -> dict:
	"""Site health as the leader last published it."""
	stored = redis_conn.get(protocol.STATUS_KEY)
	if not stored:
		return {}
	sites = json.loads(stored).get("sites", {})
	return {
		site: {k: v for k, v in entry.items() if k in ("paused_reason", "database", "site_config")}
		for site, entry in sites.items()
	}
