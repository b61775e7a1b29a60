"""Fork safety of a worker's scheduler candidate (issue 42, item 2): an rq worker whose candidate leads
`--sites` x `--schedules` every-minute schedules runs `--jobs` jobs meanwhile, each in a work-horse rq forks.

Two arms, side by side, on one dev bench (a private MariaDB and Redis):
- "candidate in the worker": the worker starts its candidate as `bench worker` does (worker_candidate.start, from
  the worker's process before rq forks any horse), and no other scheduler runs, so the candidate leads;
- "dedicated scheduler": a `btu-scheduler run` leads, and the worker starts no candidate (BTU_WORKER_CANDIDATE=0).

In each arm the jobs are queued at an even pace over `--minutes` minute boundaries, so horses fork while the leader
fires every schedule at each boundary. Per arm:
- jobs: how many ran, failed or never ended (a stuck horse), the longest, and what each horse found in itself: its
  threads (a horse inherits only the thread that forked it) and whether any scheduler module was loaded in it;
- fires: per minute boundary, the jobs the leader queued, distinct ids (a duplicate would show here), how many
  (site, schedule) pairs fired, and the fire lag (enqueued_at less the slot) p50, p99 and max;
- throughput: then `--jobs` more queued at once, and the jobs a second the worker drains them at (issue 42, item 3:
  the worker's throughput with the leader serving every schedule, beside the dedicated arm's).

    scripts/benchmark worker_fork_safety [--sites 1000] [--schedules 20] [--jobs 1000] [--minutes 2]

Creating 1,000 sites takes 1-2 minutes; the whole run about 10. Writes benchmarks/results/worker_fork_safety.json.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from datetime import datetime, timezone
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import redis  # noqa: E402
from rq import Queue, Worker  # noqa: E402
from rq.registry import FailedJobRegistry, FinishedJobRegistry  # noqa: E402

from benchmarks import common  # noqa: E402
from benchmarks.scale import ScaleBench, progress  # noqa: E402
from btu.scheduler_daemon.leading import worker_candidate  # noqa: E402
from btu.scheduler_daemon.store import jobs  # noqa: E402
from btu.shared import protocol  # noqa: E402
from tests.support.keys import KEYS
from tests.support.mariadb_server import MariaDBServer  # noqa: E402

HORSES_KEY = "benchmark:horses"
WORKER_QUEUE = "short"
LEASE_TTL = "5"


def horse(i: int) -> None:
	"""A job: what its work-horse finds in itself, pushed as "<i> <pid> <threads> <scheduler modules loaded>"."""
	import threading

	from rq import get_current_job

	loaded = sum(1 for name in sys.modules if name.startswith("btu.scheduler_daemon.leading.engine"))
	job = get_current_job()
	job.connection.rpush(HORSES_KEY, f"{i} {os.getpid()} {threading.active_count()} {loaded}")


def run_worker(bench_path: str, redis_url: str, queue: str) -> None:
	"""The worker process: its candidate first (as btu/commands.py starts it in `bench worker`), then rq's loop."""
	candidate = worker_candidate.start(bench_path)
	print(f"candidate {candidate.pid if candidate else 'none'}", flush=True)
	connection = redis.Redis.from_url(redis_url)
	Worker([Queue(queue, connection=connection)], connection=connection).work(logging_level="WARNING")


def scheduler_env(candidate: bool) -> dict:
	return {
		**os.environ,
		"PYTHONPATH": str(common.REPO),
		worker_candidate.ENV: "1" if candidate else "0",
		"BTU_SCHEDULER_EXECUTOR": "frappe",
		"BTU_SCHEDULER_LEASE_TTL_SECS": LEASE_TTL,
		"BTU_SCHEDULER_LOG_LEVEL": "WARNING",
	}


def wait_loaded(r, total: int, timeout: float) -> float:
	started = time.monotonic()
	while r.zcard(KEYS.due) < total:
		if time.monotonic() - started > timeout:
			raise RuntimeError(f"{r.zcard(KEYS.due)} of {total} schedules loaded after {timeout:.0f} s")
		time.sleep(0.2)
	return time.monotonic() - started


def feed(queue: Queue, count: int, seconds: float) -> None:
	"""Queue `count` horse jobs at an even pace over `seconds`."""
	started = time.monotonic()
	for i in range(count):
		time.sleep(max(0.0, started + i * seconds / count - time.monotonic()))
		queue.enqueue("benchmarks.worker_fork_safety.horse", i, job_timeout=60)


def throughput(r, queue: Queue, count: int) -> float:
	"""Jobs a second: `count` horse jobs queued at once, from the first queued to the last ended."""
	done = r.llen(HORSES_KEY) + count
	started = time.monotonic()
	queue.enqueue_many(
		[Queue.prepare_data("benchmarks.worker_fork_safety.horse", (-1 - i,), timeout=60) for i in range(count)]
	)
	deadline = started + 600
	while r.llen(HORSES_KEY) < done and time.monotonic() < deadline:
		time.sleep(0.05)
	return round(count / (time.monotonic() - started), 1)


def fires(r, fire_queue: str, boundaries: list[datetime]) -> list[dict]:
	"""Per minute boundary: the jobs queued for it, distinct ids, (site, schedule) pairs, and the fire lag."""
	ids = [raw.decode() for raw in r.lrange(fire_queue, 0, -1)]
	by_slot: dict[datetime, list[str]] = {}
	for job_id in ids:
		by_slot.setdefault(jobs.parse_job_id(job_id)[2], []).append(job_id)
	rows = []
	for slot in boundaries:
		slot_ids = by_slot.get(slot, [])
		pipe = r.pipeline(transaction=False)
		for job_id in slot_ids:
			pipe.hget(f"rq:job:{job_id}", "enqueued_at")
		lags = [
			(datetime.fromisoformat(value.decode().rstrip("Z")).replace(tzinfo=timezone.utc) - slot).total_seconds()
			* 1000
			for value in pipe.execute()
			if value
		]
		rows.append(
			{
				"slot": slot.isoformat(),
				"jobs": len(slot_ids),
				"distinct_ids": len(set(slot_ids)),
				"pairs": len({jobs.parse_job_id(job_id)[:2] for job_id in slot_ids}),
				**common.lag_summary(lags),
			}
		)
	return rows


def horses(r, count: int, queue: Queue) -> dict:
	records = [raw.decode().split() for raw in r.lrange(HORSES_KEY, 0, -1)]
	finished = FinishedJobRegistry(queue=queue)
	durations = []
	for job_id in finished.get_job_ids():
		started, ended = r.hmget(f"rq:job:{job_id}", "started_at", "ended_at")
		if started and ended:
			parse = lambda v: datetime.fromisoformat(v.decode().rstrip("Z"))  # noqa: E731
			durations.append((parse(ended) - parse(started)).total_seconds() * 1000)
	return {
		"queued": count,
		"ran": len(records),
		"failed": FailedJobRegistry(queue=queue).count,
		"never_ended": count - len(records),
		"distinct_horses": len({pid for _, pid, _, _ in records}),
		"max_threads_in_a_horse": max((int(t) for _, _, t, _ in records), default=None),
		"horses_with_scheduler_loaded": sum(1 for *_, loaded in records if loaded != "0"),
		"longest_job_ms": round(max(durations), 1) if durations else None,
	}


def arm(bench: ScaleBench, r, redis_url: str, args, candidate: bool, log_dir: Path) -> dict:
	"""One arm: a leader (the worker's candidate, or a dedicated scheduler), the worker, the jobs and the fires."""
	r.delete(HORSES_KEY, KEYS.due)
	fire_queue = bench.queue()
	r.delete(fire_queue)
	queue = Queue(bench.bench.queue_name(WORKER_QUEUE), connection=r)
	env = scheduler_env(candidate)
	name = "candidate" if candidate else "dedicated"
	log = (log_dir / f"{name}.log").open("w")
	started = []
	try:
		if not candidate:
			started.append(
				subprocess.Popen(
					common.scheduler_command(bench, redis_url, "frappe"),
					cwd=common.REPO,
					env=env,
					stdout=log,
					stderr=log,
				)
			)
		worker = subprocess.Popen(
			[sys.executable, "-m", "benchmarks.worker_fork_safety", "worker", str(bench.path), redis_url, queue.name],
			cwd=common.REPO,
			env=env,
			stdout=log,
			stderr=log,
		)
		started.append(worker)
		total = len(bench.sites) * args.schedules
		loaded_s = wait_loaded(r, total, timeout=max(180.0, 0.3 * len(bench.sites)))
		progress(f"{name}: {total} schedules loaded in {loaded_s:.1f} s; jobs over {args.minutes} boundaries")
		# Start 20 s before a boundary, and end 20 s after the last one.
		now = time.time()
		first = (int(now) // 60 + 1) * 60 + (60 if (int(now) // 60 + 1) * 60 - now < 25 else 0)
		time.sleep(max(0.0, first - 20 - time.time()))
		boundaries = [datetime.fromtimestamp(first + 60 * k, timezone.utc) for k in range(args.minutes)]
		feed(queue, args.jobs, 60 * (args.minutes - 1) + 40)
		deadline = time.monotonic() + 120
		while r.llen(HORSES_KEY) < args.jobs and time.monotonic() < deadline:
			time.sleep(0.5)
		time.sleep(max(0.0, boundaries[-1].timestamp() + 15 - time.time()))
		result = {
			"leader": name,
			"schedules_loaded_s": round(loaded_s, 1),
			"horses": horses(r, args.jobs, queue),
			"fires": fires(r, fire_queue, boundaries),
		}
		result["jobs_per_sec"] = throughput(r, queue, args.jobs)
		result["worker_alive"] = worker.poll() is None
	finally:
		for process in reversed(started):
			common.stop(process)
		log.close()
	return result


def main() -> None:
	if sys.argv[1:2] == ["worker"]:
		run_worker(*sys.argv[2:5])
		return
	parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
	parser.add_argument("--sites", type=int, default=1000)
	parser.add_argument("--schedules", type=int, default=20, help="every-minute schedules per site")
	parser.add_argument("--jobs", type=int, default=1000)
	parser.add_argument("--minutes", type=int, default=2, help="minute boundaries the jobs run across")
	args = parser.parse_args()
	log_dir = Path(tempfile.mkdtemp(prefix="btu-fork-safety-"))
	result: dict = {"args": vars(args), "machine": common.machine()}
	server = redis_server = bench = None
	try:
		server = MariaDBServer(max_connections=151).start()
		redis_server = common.start_redis()
		r = redis_server.client()
		bench = ScaleBench(server, [f"s{i:04d}.localhost" for i in range(args.sites)])
		bench.create(redis_server.url)
		bench.fill(args.schedules, "* * * * *")
		result["arms"] = [arm(bench, r, redis_server.url, args, candidate, log_dir) for candidate in (True, False)]
	finally:
		if bench is not None:
			bench.close()
		if redis_server is not None:
			redis_server.close()
		if server is not None:
			server.close()
	common.write_result("worker_fork_safety", result)
	print_table(result["arms"], args)
	print(f"\nlogs: {log_dir}")


def print_table(arms: list[dict], args) -> None:
	print(
		f"\n{args.jobs} jobs through one rq worker across {args.minutes} minute boundaries, while the leader fires "
		f"{args.sites} sites x {args.schedules} every-minute schedules"
	)
	rows = []
	for result in arms:
		h = result["horses"]
		rows.append(
			[
				result["leader"],
				f"{h['ran']}/{h['queued']}",
				h["failed"],
				h["never_ended"],
				h["max_threads_in_a_horse"],
				h["horses_with_scheduler_loaded"],
				h["longest_job_ms"],
				result["jobs_per_sec"],
			]
		)
	print(
		common.table(
			[
				"leader",
				"jobs ran",
				"failed",
				"never ended",
				"threads in a horse",
				"scheduler in a horse",
				"longest ms",
				"jobs/s at once",
			],
			rows,
		)
	)
	rows = [
		[
			result["leader"],
			f["slot"][11:16],
			f["jobs"],
			f["distinct_ids"],
			f["pairs"],
			f["p50_ms"],
			f["p99_ms"],
			f["max_ms"],
		]
		for result in arms
		for f in result["fires"]
	]
	print(common.table(["leader", "slot", "jobs", "distinct ids", "pairs", "lag p50 ms", "p99 ms", "max ms"], rows))


if __name__ == "__main__":
	main()
