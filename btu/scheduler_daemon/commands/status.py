"""`btu-scheduler status`: the leader, and per site what is scheduled and what fired."""

from __future__ import annotations

import json
import sys
import time

import redis

from btu.scheduler_daemon.commands import EXIT_BAD_INPUT, EXIT_FAILED, EXIT_OK
from btu.scheduler_daemon.leading import status
from btu.scheduler_daemon.operations.config import ConfigError, add_config_flags, load_config
from btu.scheduler_daemon.reads.bench import BenchError
from btu.shared import liveness, old_daemon
from btu.shared.redis_refusals import denied_message, is_denied, redis_user
from btu.shared.redis_urls import redis_address

NAME = "status"
HELP = "show the leader, schedules, next fires, recent fires and invalid rows"
DESCRIPTION = (
	"Read the scheduler's state from Redis. Exit 1 when Redis is down or no scheduler leads, 2 on a bad "
	"configuration or when Redis refuses the user (see setup redis-acl)."
)
FRAPPE_BENCH = True


def arguments(parser) -> None:
	parser.add_argument("--json", action="store_true", help="print the status as JSON")
	parser.add_argument("--site", help="only this site")
	add_config_flags(parser)


def run(args) -> int:
	try:
		config = load_config(args)
		keys = config.keys()
		client = config.redis(socket_connect_timeout=5)
	except (ConfigError, BenchError, ValueError) as exc:
		print(f"btu-scheduler status: {exc}", file=sys.stderr)
		return EXIT_BAD_INPUT
	try:
		summary = status.build(client, keys, health=status.stored_health(client, keys))
		summary["redis"] = redis_address(client)  # after a read: a Sentinel client has found its master
	except redis.RedisError as exc:
		if is_denied(exc):  # status reads only the bench's BTU keys
			denied = denied_message(exc, redis_user(client), keys.grant)
			print(f"btu-scheduler status: {denied}", file=sys.stderr)
			return EXIT_BAD_INPUT
		print(f"btu-scheduler status: Redis is not answering ({exc})", file=sys.stderr)
		return EXIT_FAILED
	summary["original_btu"] = old_daemon.report(client, time.time())
	if args.site:
		summary["sites"] = {k: v for k, v in summary["sites"].items() if k == args.site}
	if args.json:
		print(json.dumps(summary, indent=2))
	else:
		print(render(summary))
	return EXIT_OK if summary["leader"] else EXIT_FAILED


def render_metrics(figures: dict) -> str:
	"""A process's figures (`Metrics.summary`, as its heartbeat carries them), the ones its /metrics exports."""
	skipped = figures.get("skipped") if isinstance(figures.get("skipped"), dict) else {}
	lag = ", ".join(
		f"{q} {figures[key]} ms"
		for q, key in (("p50", "lag_p50_ms"), ("p99", "lag_p99_ms"))
		if figures.get(key) is not None
	)
	parts = [
		f"fires {figures.get('fires', 0)}" + (f" (lag {lag})" if lag else ""),
		"skipped " + (" ".join(f"{reason}={count}" for reason, count in skipped.items()) or "0"),
		*(
			f"{label} {figures.get(key, 0)}"
			for label, key in (
				("returned", "returned"),
				("elections", "elections"),
				("redis errors", "redis_errors"),
				("database errors", "database_errors"),
				("rpc commands", "rpc_commands"),
			)
		),
	]
	return ", ".join(parts)


def runs_where(process: dict) -> str:
	"""What runs the scheduler: a dedicated process, or a Frappe worker's candidate (with the worker's pid)."""
	if process.get("kind") == liveness.WORKER:
		return f"in Frappe worker pid {process.get('worker_pid')}"
	return "dedicated process"


def render(summary: dict) -> str:
	lines = [f"redis: {summary['redis']}"] if summary.get("redis") else []
	if summary.get("original_btu"):
		lines.append(f"original BTU: {summary['original_btu']}")
	lead = summary["leader"]
	if lead:
		lines.append(
			f"leader: {lead['holder']} ({runs_where(lead)}, host {lead.get('host')}, pid {lead.get('pid')}, since "
			f"{lead.get('since')}, lease token {lead['token']}, {lead['lease_ms_left']} ms left)"
		)
	else:
		lines.append("leader: none (no scheduler is running against this Redis)")
	for process in summary["processes"]:
		redis_at = (
			f", redis {process['redis']}, replicas {process.get('replicas', '?')}"
			f" (fires wait for {process.get('replica_acks', 0)})"
			if process.get("redis")
			else ""
		)
		lines.append(
			f"  process {process['id']}: {process['role']}, {runs_where(process)}, heartbeat "
			f"{process['heartbeat_at']}{redis_at}"
		)
		if isinstance(process.get("metrics"), dict) and process["metrics"]:
			lines.append(f"    since start: {render_metrics(process['metrics'])}")
	for site, entry in summary["sites"].items():
		requests = entry.get("run_requests") or 0
		lines.append(
			f"site {site}: {entry.get('schedules', 0)} schedules"
			+ (f", of which {requests} run requests (retries, backfills, chained runs)" if requests else "")
		)
		for key in ("paused_reason", "database"):
			if entry.get(key):
				lines.append(f"  {key}: {entry[key]}")
		if entry.get("oldest_overdue_ms") is not None:
			lines.append(f"  oldest overdue fire: {entry['oldest_overdue_ms']} ms")
		counters = entry.get("counters") or {}
		if counters:
			lines.append("  counters: " + ", ".join(f"{k}={v}" for k, v in sorted(counters.items())))
		lines.append("  next fires:")
		for fire in entry.get("next_fires", []):
			lines.append(f"    {fire['fire_at']}  {fire['schedule']}")
		lines.append("  recent fires:")
		for fire in entry.get("recent_fires", []):
			lines.append(
				f"    {fire['slot']}  {fire['schedule']}  {fire['outcome']}  lag {fire['lag_ms']} ms  {fire['job_id']}"
			)
		for name, reason in (entry.get("invalid") or {}).items():
			lines.append(f"  invalid {name}: {reason}")
	quarantined = summary.get("quarantine") or {}
	if quarantined:
		lines.append(
			f"quarantine: {len(quarantined)} wrong values moved aside "
			"(nothing fires from them; schedules are rebuilt from their rows)"
		)
		for what, record in sorted(quarantined.items(), key=lambda pair: pair[1].get("at") or ""):
			lines.append(f"  {record.get('at')}  {what}: {record.get('reason')}")
	for problem in summary.get("problems") or []:
		lines.append(f"problem: {problem}")
	return "\n".join(lines)
