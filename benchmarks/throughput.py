r"""Sustained fires per second with full Frappe-format jobs, and scheduler RSS at 10k and 100k schedules.

For each size N: N schedules every second (cron `* * * * * *`, executor `frappe`), so the
scheduler must fire N per second. No worker: the jobs pushed onto the site's queue are
counted (LLEN) over --seconds after a warm-up. Fires/s is what was pushed per second; if it is
below N the scheduler is the bottleneck and that figure is its ceiling. RSS is VmRSS of the
scheduler process from /proc at the end.

With --replica both (or yes) a replica of the Redis is started too: every prepare and release then
WAITs for it (replica_acks), which is what a Sentinel deployment pays.

With --metrics both (or on) the scheduler also serves /metrics, scraped every second.

With --max-concurrent N the benchmark task has that concurrency limit: with no worker, N of its jobs stay
queued and every later fire is released as skipped_concurrency after checking them, the dearest release
there is. "handled/s" counts the fires released either way (the site's counters), which fires/s (pushed
jobs) then does not.

    scripts/benchmark throughput [--seconds 30] [--sizes 10000,100000] [--replica no|yes|both] \
        [--metrics off|on|both] [--max-concurrent N]
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks import common  # noqa: E402
from btu.scheduler_daemon.store.outcomes import FireOutcome  # noqa: E402
from btu.shared import protocol  # noqa: E402
from tests.support.keys import KEYS


def start_replica(server) -> common.RedisServer:
	"""A replica of `server`, in sync: the scheduler's fire writes then WAIT for it (replica_acks)."""
	replica = common.RedisServer(args=("--replicaof", "127.0.0.1", str(server.port))).start()
	deadline = time.monotonic() + 30
	while replica.client().info("replication").get("master_link_status") != "up":
		if time.monotonic() > deadline:
			raise RuntimeError("the replica did not sync within 30 s")
		time.sleep(0.05)
	return replica


def handled(r) -> int:
	"""Fires released so far: enqueued or skipped at release (the site's counters)."""
	counts = r.hmget(
		KEYS.counters_key(common.SITE),
		FireOutcome.ENQUEUED,
		FireOutcome.SKIPPED_OVERLAP,
		FireOutcome.SKIPPED_CONCURRENCY,
	)
	return sum(int(c or 0) for c in counts)


def measure(bench: common.DevBench, count: int, seconds: float, warmup: float, replica: bool, metrics: bool) -> dict:
	with bench.data.conn.cursor() as cur:
		cur.execute("DELETE FROM `tabBTU Task Schedule`")
	bench.insert_schedules(
		[{"run_frequency": "Cron Style", "cron_string": "* * * * * *", "catch_up_policy": "skip"} for _ in range(count)]
	)
	server = common.start_redis()
	replica_server = start_replica(server) if replica else None
	r = server.client()
	scheduler, scraper = common.start_btu(bench, server.url, "frappe", metrics)
	try:
		load_secs = common.wait_for_schedules(r, count, timeout=480)
		rss_loaded = common.rss_mb(scheduler.pid)
		time.sleep(warmup)
		cpu0, jobs0, handled0, t0 = common.cpu_seconds(scheduler.pid), r.llen(bench.queue), handled(r), time.monotonic()
		rss_peak = 0.0
		while time.monotonic() - t0 < seconds:
			time.sleep(0.5)
			rss_peak = max(rss_peak, common.rss_mb(scheduler.pid))
			if r.llen(bench.queue) > 3_000_000:
				break
		elapsed = time.monotonic() - t0
		jobs = r.llen(bench.queue) - jobs0
		handled_per_s = (handled(r) - handled0) / elapsed
		cpu = common.cpu_seconds(scheduler.pid) - cpu0
		counters = {}
		for key, value in r.hgetall(KEYS.counters_key(common.SITE)).items():
			counters[key.decode()] = int(value)
		sample_id = r.lindex(bench.queue, -1)
		sample = (
			{k.decode(): v.decode(errors="replace")[:120] for k, v in r.hgetall(b"rq:job:" + sample_id).items()}
			if sample_id
			else {}
		)
		return {
			"schedules": count,
			"replica": replica,
			"metrics": common.metrics_setting(metrics),
			"offered_fires_per_s": count,
			"fires_per_s": jobs / elapsed,
			"handled_per_s": handled_per_s,
			"seconds": elapsed,
			"scheduler_cpu_percent": 100 * cpu / elapsed,
			"load_secs": load_secs,
			"rss_loaded_mb": rss_loaded,
			"rss_peak_mb": rss_peak,
			"redis_used_memory_mb": r.info("memory")["used_memory"] / 2**20,
			"counters": counters,
			"sample_job": sample,
			"scrapes": scraper.scrapes if scraper else 0,
		}
	finally:
		if scraper:
			scraper.stop()
		common.stop(scheduler)
		server.close()
		if replica_server:
			replica_server.close()


def main() -> None:
	parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
	parser.add_argument("--seconds", type=float, default=30, help="measuring time per size (default 30)")
	parser.add_argument("--warmup", type=float, default=5)
	parser.add_argument("--sizes", default="10000,100000")
	parser.add_argument(
		"--replica",
		choices=("no", "yes", "both"),
		default="no",
		help="measure with a replica that each fire write WAITs for",
	)
	common.add_metrics_argument(parser)
	parser.add_argument(
		"--max-concurrent", type=int, default=0, help="the benchmark task's max_concurrent_runs (default 0: no limit)"
	)
	args = parser.parse_args()
	replicas = {"no": [False], "yes": [True], "both": [False, True]}[args.replica]
	bench = common.DevBench("redis://127.0.0.1:1/0")
	bench.data.update("BTU Task", bench.task, max_concurrent_runs=args.max_concurrent)
	rows = []
	try:
		for size in [int(s) for s in args.sizes.split(",")]:
			print(f"-- {size} schedules", file=sys.stderr, flush=True)
			for replica in replicas:
				for metrics in common.metrics_modes(args.metrics):
					rows.append(measure(bench, size, args.seconds, args.warmup, replica, metrics))
	finally:
		bench.close()
	text = common.table(
		[
			"schedules",
			"replica",
			"metrics",
			"offered fires/s",
			"fires/s",
			"handled/s",
			"scheduler CPU %",
			"load s",
			"RSS loaded MB",
			"RSS peak MB",
			"Redis MB",
		],
		[
			[
				r["schedules"],
				"yes" if r["replica"] else "no",
				r["metrics"],
				r["offered_fires_per_s"],
				r["fires_per_s"],
				r["handled_per_s"],
				r["scheduler_cpu_percent"],
				r["load_secs"],
				r["rss_loaded_mb"],
				r["rss_peak_mb"],
				r["redis_used_memory_mb"],
			]
			for r in rows
		],
	)
	print(text)
	path = common.write_result(
		"throughput",
		{"args": vars(args), "rows": rows, "table": text, "targets": {"fires_per_s": 10000, "rss_mb": 150}},
	)
	print(f"\nwrote {path}")


if __name__ == "__main__":
	main()
