"""What a Frappe worker's scheduler candidate costs (issue 42), inside a Frappe bench with BTU installed.

    /root/frappe-bench/env/bin/python benchmarks/worker_candidate.py --bench /root/frappe-bench --site test.localhost

Three figures, side by side with a worker that runs no candidate (BTU_WORKER_CANDIDATE=0):
- a standby candidate (a dedicated `btu-scheduler run` leads): its CPU over `--idle-secs`, as a share of one core,
  and its resident memory;
- a leading candidate on an idle bench (the dedicated one stopped): the same;
- the worker's throughput: `--jobs` jobs of `frappe.ping` queued at once with `frappe.enqueue`, drained by one
  `frappe worker`, twice with its candidate leading and twice with no candidate (a dedicated scheduler leading), in
  the order with, without, without, with.

CPU from /proc's per-thread schedstat (nanoseconds on a CPU; utime + stime counts 10 ms ticks, a standby's whole
minute), memory from VmRSS. Holds the bench's tier-2 lock while it runs. Prints a table and
writes benchmarks/results/worker_candidate.json.
"""

from __future__ import annotations

import argparse
import fcntl
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks.common import on_cpu_seconds, rss_mb  # noqa: E402

RESULTS = Path(__file__).resolve().parent / "results" / "worker_candidate.json"
QUEUE = "short"


def children(pid: int) -> list[int]:
	path = Path(f"/proc/{pid}/task/{pid}/children")
	return [int(p) for p in path.read_text().split()] if path.exists() else []


class Bench:
	def __init__(self, path: Path, site: str):
		self.path, self.site = path, site
		self.python = str(path / "env" / "bin" / "python")
		self.started: list[subprocess.Popen] = []

	def start(self, *args: str, candidate: bool = True) -> subprocess.Popen:
		env = {**os.environ, "BTU_WORKER_CANDIDATE": "1" if candidate else "0"}
		process = subprocess.Popen(
			[self.python, *args], cwd=self.path / "sites", env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
		)
		self.started.append(process)
		return process

	def worker(self, candidate: bool) -> subprocess.Popen:
		return self.start("-m", "frappe.utils.bench_helper", "frappe", "worker", "--queue", QUEUE, candidate=candidate)

	def dedicated(self) -> subprocess.Popen:
		return self.start("-m", "btu.scheduler_daemon", "run", "--bench", str(self.path))

	def stop(self, process: subprocess.Popen) -> None:
		process.send_signal(signal.SIGTERM)
		try:
			process.wait(30)
		except subprocess.TimeoutExpired:
			process.kill()
			process.wait()

	def close(self) -> None:
		for process in self.started:
			if process.poll() is None:
				self.stop(process)

	def enqueue_pings(self, jobs: int) -> None:
		code = (
			"import sys, frappe\nfrappe.init(sys.argv[1]); frappe.connect()\n"
			f"for _ in range({jobs}): frappe.enqueue('frappe.ping', queue='{QUEUE}')\nfrappe.db.commit()"
		)
		subprocess.run([self.python, "-c", code, self.site], cwd=self.path / "sites", check=True)

	def queued(self) -> int:
		code = (
			"import sys, frappe\nfrappe.init(sys.argv[1])\nfrom frappe.utils.background_jobs import get_queue\n"
			f"print(len(get_queue('{QUEUE}')))"
		)
		out = subprocess.run(
			[self.python, "-c", code, self.site], cwd=self.path / "sites", capture_output=True, text=True
		)
		return int(out.stdout.strip().splitlines()[-1])


def candidate_of(worker: subprocess.Popen, timeout: float = 60) -> int:
	deadline = time.monotonic() + timeout
	while time.monotonic() < deadline:
		found = [pid for pid in children(worker.pid) if b"--for-worker" in Path(f"/proc/{pid}/cmdline").read_bytes()]
		if found:
			return found[0]
		time.sleep(0.2)
	raise RuntimeError(f"worker {worker.pid} started no candidate within {timeout} s")


def idle_cost(pid: int, secs: float) -> dict:
	time.sleep(10)  # settled: imports done, first reconcile over
	before, started = on_cpu_seconds(pid), time.monotonic()
	time.sleep(secs)
	share = (on_cpu_seconds(pid) - before) / (time.monotonic() - started) * 100
	return {"cpu_percent_of_core": round(share, 4), "rss_mb": round(rss_mb(pid), 1)}


def throughput(bench: Bench, jobs: int, candidate: bool) -> float:
	bench.enqueue_pings(jobs)
	worker = bench.worker(candidate)
	started = time.monotonic()
	while bench.queued():
		time.sleep(0.2)
	elapsed = time.monotonic() - started
	bench.stop(worker)
	return round(jobs / elapsed, 1)


def main() -> None:
	parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
	parser.add_argument("--bench", type=Path, required=True)
	parser.add_argument("--site", required=True)
	parser.add_argument("--idle-secs", type=float, default=60)
	parser.add_argument("--jobs", type=int, default=500)
	args = parser.parse_args()
	bench = Bench(args.bench.resolve(), args.site)
	lock = open(bench.path / ".btu-tier2.lock", "w")
	fcntl.flock(lock, fcntl.LOCK_EX)
	try:
		dedicated = bench.dedicated()
		worker = bench.worker(candidate=True)
		candidate = candidate_of(worker)
		standby = idle_cost(candidate, args.idle_secs)
		bench.stop(dedicated)
		leading = idle_cost(candidate, args.idle_secs)
		bench.stop(worker)
		# In the order with, without, without, with: a later run finds warmer caches, so neither arm goes first only.
		rates: dict[bool, list[float]] = {True: [], False: []}
		for candidate in (True, False, False, True):
			if not candidate and dedicated.poll() is not None:
				dedicated = bench.dedicated()  # with no candidate, a dedicated scheduler leads
			if candidate and dedicated.poll() is None:
				bench.stop(dedicated)
			rates[candidate].append(throughput(bench, args.jobs, candidate=candidate))
		with_candidate, without = (round(sum(rates[arm]) / 2, 1) for arm in (True, False))
	finally:
		bench.close()
	result = {
		"standby_candidate": standby,
		"leading_candidate_idle_bench": leading,
		"worker_jobs_per_sec": {"candidate_leading": rates[True], "no_candidate": rates[False]},
		"jobs": args.jobs,
		"python": sys.version.split()[0],
	}
	RESULTS.parent.mkdir(exist_ok=True)
	RESULTS.write_text(json.dumps(result, indent=1))
	print(f"{'':34} {'CPU % of a core':>16} {'RSS MB':>8}")
	for name, figures in (("standby candidate", standby), ("leading candidate, idle bench", leading)):
		print(f"{name:34} {figures['cpu_percent_of_core']:>16} {figures['rss_mb']:>8}")
	print(
		f"\n{args.jobs} frappe.ping jobs through one worker, in the order with, without, without, with: "
		f"{with_candidate} jobs/s with its candidate leading {rates[True]}, {without} with no candidate {rates[False]}"
	)


if __name__ == "__main__":
	main()
