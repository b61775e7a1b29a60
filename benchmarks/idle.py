"""Idle CPU: 10,000 schedules due hours away, CPU of the scheduler process (and of Redis) over 60 s.

CPU is utime+stime from /proc/<pid>/stat, as a percentage of one core. Each system runs on
its own private Redis; the measurement starts after a settle time once the schedules are loaded.

    scripts/benchmark idle [--seconds 60]
"""

from __future__ import annotations

import argparse
import sys
import time
from datetime import datetime, timedelta, timezone
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks import common  # noqa: E402
from benchmarks.peers import APScheduler, RqCron, RqOwnScheduler, RqScheduler, Schedule, new_log_dir  # noqa: E402

COUNT = 10000
SYSTEMS = ("btu", "rqs60", "rqs1", "rqat", "rqcron", "aps")


def sample(pids: dict[str, int], seconds: float) -> dict[str, float]:
	before = {name: common.cpu_seconds(pid) for name, pid in pids.items()}
	t0 = time.monotonic()
	time.sleep(seconds)
	elapsed = time.monotonic() - t0
	return {name: 100 * (common.cpu_seconds(pid) - before[name]) / elapsed for name, pid in pids.items()}


def run_btu(seconds: float, settle: float) -> dict:
	server = common.start_redis()
	bench = common.DevBench(server.url)
	due = datetime.now(timezone.utc) + timedelta(hours=3)
	bench.insert_schedules([{"run_frequency": "Once", "run_at": due} for _ in range(COUNT)])
	scheduler = common.start_scheduler(bench, server.url, "frappe")
	try:
		common.wait_for_schedules(server.client(), COUNT)
		time.sleep(settle)
		cpu = sample({"scheduler": scheduler.pid, "redis": server.process.pid}, seconds)
		return {
			"system": "BTU",
			"settings": "defaults (lease 5 s, reconcile every 60 s)",
			**cpu,
			"rss_mb": common.rss_mb(scheduler.pid),
		}
	finally:
		common.stop(scheduler)
		bench.close()
		server.close()


def run_peer(key: str, seconds: float, settle: float, log_dir: Path) -> dict:
	server = common.start_redis()
	url = server.url
	peer = {
		"rqs60": lambda: RqScheduler(url, log_dir, 60),
		"rqs1": lambda: RqScheduler(url, log_dir, 1),
		"rqat": lambda: RqOwnScheduler(url, log_dir),
		"rqcron": lambda: RqCron(url, log_dir),
		"aps": lambda: APScheduler(url, log_dir, best=False),
	}[key]()
	due = time.time() + 3 * 3600
	try:
		if isinstance(peer, RqCron):
			# Interval jobs fire when the process starts: a daily cron three hours ahead instead.
			at = datetime.fromtimestamp(due, timezone.utc)
			peer.prepare([Schedule(i, due, 86400) for i in range(COUNT)], due)
			text = peer.config.read_text().replace("interval=86400", f"cron='{at.minute} {at.hour} * * *'")
			peer.config.write_text(text)
		else:
			peer.prepare([Schedule(i, due, None) for i in range(COUNT)], due)
		peer.start()
		peer.ready(server.client())
		time.sleep(settle)
		cpu = sample({"scheduler": peer.pid, "redis": server.process.pid}, seconds)
		return {"system": peer.name, "settings": peer.settings, **cpu, "rss_mb": common.rss_mb(peer.pid)}
	finally:
		peer.stop()
		server.close()


def main() -> None:
	parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
	parser.add_argument("--seconds", type=float, default=60)
	parser.add_argument("--settle", type=float, default=10, help="seconds between loading and measuring")
	common.add_systems_argument(parser, SYSTEMS)
	args = parser.parse_args()
	log_dir = new_log_dir("idle")
	rows = []
	for key in [s for s in args.systems.split(",") if s]:
		print(f"-- {key}", file=sys.stderr, flush=True)
		try:
			rows.append(
				run_btu(args.seconds, args.settle)
				if key == "btu"
				else run_peer(key, args.seconds, args.settle, log_dir)
			)
		except Exception as exc:
			rows.append({"system": key, "settings": "", "note": f"failed: {type(exc).__name__}: {exc}"})
	text = common.table(
		["system", "settings", "scheduler CPU % of a core", "Redis CPU %", "scheduler RSS MB", "note"],
		[
			[r["system"], r["settings"], r.get("scheduler"), r.get("redis"), r.get("rss_mb"), r.get("note", "")]
			for r in rows
		],
	)
	print(text)
	path = common.write_result(
		"idle",
		{
			"args": vars(args),
			"schedules": COUNT,
			"rows": rows,
			"table": text,
			"targets": {"btu_scheduler_percent": 0.1},
		},
	)
	print(f"\nwrote {path} (logs in {log_dir})")


if __name__ == "__main__":
	main()
