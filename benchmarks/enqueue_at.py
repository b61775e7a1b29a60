"""btu.enqueue_at inside a Frappe bench: calls per second from one process, and fire lag through the real scheduler.

Needs a Frappe bench with BTU installed (tier 2's); run it with the bench's Python from the repository root:

    /root/frappe-bench/env/bin/python benchmarks/enqueue_at.py --bench /root/frappe-bench --site test.localhost

1. Calls per second, side by side with Frappe's own `frappe.enqueue` (which runs now, not at a moment):
   - `enqueue_at` N times in one transaction (a request that enqueues many, e.g. one reminder per invoice);
   - one call per transaction with its commit, as N web requests would make them (the RPC to the scheduler is sent
     after the response in a web request, so it is timed apart: `announce` below, one per request).
2. Fire lag: K requests at random milliseconds over the next seconds, a BTU scheduler running (`--executor frappe`);
   the lag of each is its job's `enqueued_at` minus the moment asked for (read from the RQ job, no worker needed).

The requests and jobs it makes are deleted afterwards. Prints a table, writes benchmarks/results/enqueue_at.json.
"""

from __future__ import annotations

import argparse
import os
import random
import subprocess
import sys
import time
from contextlib import contextmanager
from datetime import datetime, timedelta, timezone
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import connect_site, lag_summary, table, write_result  # noqa: E402

from tests.support.keys import KEYS

# A declared function of the tier-2 tests' (its jobs are withdrawn before any worker would run them).
FUNCTION = "btu.btu_core.tests.sample_tasks.note_call"
MARKER = "benchmark-enqueue-at"


def rate(count: int, seconds: float) -> float:
	return count / seconds if seconds else float("inf")


def calls_per_second(frappe, n: int) -> list[list]:
	import btu

	at = datetime.now(timezone.utc) + timedelta(hours=1)
	rows = []
	made: list[str] = []

	started = time.perf_counter()
	for i in range(n):
		made.append(btu.enqueue_at(FUNCTION, at, marker=MARKER, value=f"{i} 1"))
	in_one = time.perf_counter() - started
	frappe.db.rollback()  # also drops the after-commit RPCs
	rows.append(["btu.enqueue_at, one transaction (rolled back)", n, rate(n, in_one), in_one / n * 1000])

	started = time.perf_counter()
	announce = 0.0
	for i in range(n):
		made.append(btu.enqueue_at(FUNCTION, at, marker=MARKER, value=f"{i} 2"))
		# Each commit would send one RPC; time the RPC apart, as a web request sends it after its response.
		callbacks = list(frappe.db.after_commit._functions)
		frappe.db.after_commit.reset()
		frappe.db.commit()
		sent = time.perf_counter()
		for callback in callbacks:
			callback()
		announce += time.perf_counter() - sent
	per_request = time.perf_counter() - started - announce
	rows.append(["btu.enqueue_at + commit (a web request each)", n, rate(n, per_request), per_request / n * 1000])
	rows.append(["  its RPC to the scheduler (after the response)", n, rate(n, announce), announce / n * 1000])

	started = time.perf_counter()
	for i in range(n):
		frappe.enqueue(FUNCTION, queue="default", enqueue_after_commit=False, marker=MARKER, value=f"{i} 3")
	plain = time.perf_counter() - started
	rows.append(["frappe.enqueue (runs now), no commit needed", n, rate(n, plain), plain / n * 1000])

	withdraw(frappe, made)
	return rows


def withdraw(frappe, handles: list[str]) -> None:
	"""Delete the requests and tell the running scheduler, so no state of theirs is left to fire; empty the queue."""
	from btu.btu_core import scheduler_link
	from btu.shared import protocol
	from btu.shared.run_kind import RunKey, RunKind

	runs = [RunKey(RunKind.RUN_REQUEST, handle).format() for handle in handles]
	frappe.db.delete("BTU Run Request", {"name": ("in", handles)})
	frappe.db.commit()
	for run in runs:
		scheduler_link.send(protocol.CANCEL_TASK_SCHEDULE, run)  # the command for a row deleted already
	# The scheduler ACKs a command before it carries it out: wait until the states are gone.
	redis, key = scheduler_link.queue_redis(), KEYS.site_schedules_key(frappe.local.site)
	deadline = time.monotonic() + 60
	while time.monotonic() < deadline and any(redis.sismember(key, run) for run in runs):
		time.sleep(0.5)
	clear_queue(frappe)


def clear_queue(frappe) -> None:
	from frappe.utils.background_jobs import get_queue

	queue = get_queue("default")
	queue.empty()


@contextmanager
def scheduler_running(bench: Path):
	"""A BTU scheduler (frappe executor) for the bench, answering pings."""
	from btu.btu_core import scheduler_link
	from btu.shared import protocol

	log = open("/tmp/btu-bench-enqueue-at-scheduler.log", "w")
	scheduler = subprocess.Popen(
		[sys.executable, "-m", "btu.scheduler_daemon", "run", "--bench", str(bench), "--executor", "frappe"],
		cwd=bench,
		stdout=log,
		stderr=subprocess.STDOUT,
	)
	try:
		deadline = time.monotonic() + 30
		while not scheduler_link.send(protocol.PING).ok:
			if time.monotonic() > deadline or scheduler.poll() is not None:
				raise SystemExit(
					"the scheduler did not answer a ping within 30 s; see /tmp/btu-bench-enqueue-at-scheduler.log"
				)
			time.sleep(0.2)
		yield
	finally:
		scheduler.terminate()
		scheduler.wait(30)


def fire_lags(frappe, k: int, spread: float) -> list[float]:
	from frappe.utils.background_jobs import get_queue
	from rq.job import Job

	import btu
	from btu.shared.job_contract import run_of
	from btu.shared.run_kind import RunKind

	clear_queue(frappe)
	start = datetime.now(timezone.utc) + timedelta(seconds=3)
	moments = {}
	for i in range(k):
		moment = start + timedelta(milliseconds=random.randrange(int(spread * 1000)))
		moments[btu.enqueue_at(FUNCTION, moment, marker=MARKER, value=f"{i} 4")] = moment
	frappe.db.commit()  # then one RPC per request, as each web request would send
	time.sleep(max(0.0, (start - datetime.now(timezone.utc)).total_seconds()) + spread + 3)
	queue = get_queue("default")
	lags = []
	for job_id in queue.get_job_ids():
		job = Job.fetch(job_id, connection=queue.connection)
		runner = (job.kwargs or {}).get("kwargs") or {}
		run = run_of(runner.get("schedule") or "", runner.get("kind"))
		handle = run.name if run.kind is RunKind.RUN_REQUEST else None
		if handle in moments:
			lags.append((job.enqueued_at.replace(tzinfo=timezone.utc) - moments[handle]).total_seconds() * 1000)
	if len(lags) != k:
		print(f"warning: {k - len(lags)} of {k} requests not on the queue", file=sys.stderr)
	withdraw(frappe, list(moments))
	return lags


def main() -> None:
	parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
	parser.add_argument("--bench", type=Path, default=Path(os.environ.get("BTU_BENCH", Path.home() / "frappe-bench")))
	parser.add_argument("--site", default=os.environ.get("BTU_SITE", "test.localhost"))
	parser.add_argument("--calls", type=int, default=1000)
	parser.add_argument("--fires", type=int, default=200)
	parser.add_argument("--spread-secs", type=float, default=10.0)
	args = parser.parse_args()
	frappe = connect_site(args.bench.resolve(), args.site)
	with scheduler_running(args.bench.resolve()):
		rows = calls_per_second(frappe, args.calls)
		lags = fire_lags(frappe, args.fires, args.spread_secs)
	print("calls from one process, a BTU scheduler running")
	print(table(["call", "n", "calls/s", "ms per call"], rows))
	summary = lag_summary(lags)
	print(
		f"\nfire lag of {args.fires} enqueue_at requests at random milliseconds over {args.spread_secs:.0f} s "
		"(job enqueued_at - moment asked)"
	)
	print(
		table(
			["count", "p50 ms", "p90 ms", "p99 ms", "max ms"],
			[[summary["count"], summary["p50_ms"], summary["p90_ms"], summary["p99_ms"], summary["max_ms"]]],
		)
	)
	path = write_result(
		"enqueue_at",
		{"calls": [dict(zip(["call", "n", "calls_per_s", "ms_per_call"], row)) for row in rows], "fire_lag": summary},
	)
	print(f"\n(written to {path})")
	frappe.destroy()


if __name__ == "__main__":
	main()
