"""Burst: 10,000 schedules due at one instant; time until every one is enqueued, per system.

BTU: 10,000 Once schedules at the instant. Peers: the same 10,000 one-shot jobs (rq-scheduler
`enqueue_at`, RQ's own `enqueue_at` run by `rq worker --with-scheduler`, APScheduler 3 date
triggers with a Redis job store). Times are each job hash's `enqueued_at` minus the instant;
"all seen after" is when an observer popping the queue had the last job (no worker runs).
RQ cron has no one-shot jobs and minute-precision cron only: shown as not able.

    scripts/benchmark burst
"""

from __future__ import annotations

import argparse
import math
import sys
import time
from datetime import datetime, timezone
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks import common  # noqa: E402
from benchmarks.observe import Observer, worker_records  # noqa: E402
from benchmarks.peers import QUEUE_KEY, APScheduler, RqOwnScheduler, RqScheduler, Schedule, new_log_dir  # noqa: E402

SYSTEMS = ("btu", "rqs60", "rqs1", "rqat", "aps", "apsbest")


def summary(times: list[float], instant: float, count: int, seen: list[float] | None = None) -> dict:
	"""Lags from `enqueued_at`; with `seen` (the observer's pop times), also when the last job could be taken."""
	lags = sorted((t - instant) * 1000 for t in times)
	out = {
		"enqueued": len(lags),
		"expected": count,
		"all_enqueued_ms": lags[-1] if len(lags) >= count else None,
		**common.lag_summary(lags),
	}
	if seen and len(seen) >= count:
		out["all_seen_ms"] = (max(seen) - instant) * 1000
	return out


def run_btu(count: int, log_dir: Path) -> dict:
	server = common.start_redis()
	r = server.client()
	bench = common.DevBench(server.url)
	instant = math.ceil(time.time()) + 40
	bench.insert_schedules(
		[{"run_frequency": "Once", "run_at": datetime.fromtimestamp(instant, timezone.utc)} for _ in range(count)]
	)
	log = (log_dir / "btu-scheduler.log").open("w")
	scheduler = common.start_scheduler(bench, server.url, "frappe", log=log)
	try:
		common.wait_for_schedules(r, count)
		if time.time() > instant - 1:
			raise RuntimeError("loading took longer than the lead time")
		observer = Observer(r, bench.queue).start()
		time.sleep(instant + 10 - time.time())
		fires = observer.stop()
		return {
			"system": "BTU",
			"settings": "defaults (executor frappe)",
			**summary([t for _, t in fires], instant, count, [t for _, t in observer.seen]),
		}
	finally:
		common.stop(scheduler)
		log.close()
		bench.close()
		server.close()


def run_peer(key: str, count: int, log_dir: Path) -> dict:
	server = common.start_redis()
	r = server.client()
	url = server.url
	peer = {
		"rqs60": lambda: RqScheduler(url, log_dir, 60),
		"rqs1": lambda: RqScheduler(url, log_dir, 1),
		"rqat": lambda: RqOwnScheduler(url, log_dir),
		"aps": lambda: APScheduler(url, log_dir, best=False),
		"apsbest": lambda: APScheduler(url, log_dir, best=True),
	}[key]()
	instant = math.ceil(time.time()) + (50 if isinstance(peer, APScheduler) else 15)
	try:
		peer.prepare([Schedule(i, instant, None) for i in range(count)], instant)
		peer.start()
		peer.ready(r)
		if time.time() > instant - 1:
			raise RuntimeError("setup took longer than the lead time")
		wait = 75 if key == "rqs60" else 30
		if peer.runs_worker:
			deadline = instant + 120
			while r.llen("benchmark:starts") < count and time.time() < deadline:
				time.sleep(0.5)
			times, seen = [t for _, t in worker_records(r)[0]], None
		else:
			observer = Observer(r, QUEUE_KEY).start()
			time.sleep(instant + wait - time.time())
			times = [t for _, t in observer.stop()]
			seen = [t for _, t in observer.seen]
		return {"system": peer.name, "settings": peer.settings, **summary(times, instant, count, seen)}
	finally:
		peer.stop()
		server.close()


def main() -> None:
	parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
	parser.add_argument("--count", type=int, default=10000)
	common.add_systems_argument(parser, SYSTEMS)
	args = parser.parse_args()
	log_dir = new_log_dir("burst")
	rows = []
	for key in [s for s in args.systems.split(",") if s]:
		print(f"-- {key}", file=sys.stderr, flush=True)
		try:
			rows.append(run_btu(args.count, log_dir) if key == "btu" else run_peer(key, args.count, log_dir))
		except Exception as exc:
			rows.append({"system": key, "settings": "", "note": f"failed: {type(exc).__name__}: {exc}"})
	rows.append(
		{"system": "RQ cron", "settings": "", "note": "cannot do it: no one-shot jobs, cron is minute-precision"}
	)
	rows = common.merge_previous("burst", rows, ("system", "settings"))
	text = common.table(
		[
			"system",
			"settings",
			"enqueued",
			"all enqueued after ms",
			"all seen after ms",
			"p50 ms",
			"p99 ms",
			"max ms",
			"note",
		],
		[
			[
				r["system"],
				r["settings"],
				r.get("enqueued"),
				r.get("all_enqueued_ms"),
				r.get("all_seen_ms"),
				r.get("p50_ms"),
				r.get("p99_ms"),
				r.get("max_ms"),
				r.get("note", ""),
			]
			for r in rows
		],
	)
	print(text)
	path = common.write_result(
		"burst", {"args": vars(args), "rows": rows, "table": text, "targets": {"btu_all_enqueued_ms": 1000}}
	)
	print(f"\nwrote {path} (logs in {log_dir})")


if __name__ == "__main__":
	main()
