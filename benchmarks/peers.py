"""The peer schedulers, each set up to do the same work as BTU on the same kind of private Redis.

A workload is a list of `Schedule`s: schedule `i` first due at `first` (epoch
seconds), then every `period` seconds (None: once). Every system enqueues
`benchmarks.jobs.record(i=i)` as an RQ job on queue `bench` (BTU on its
site's queue), so the job hash's `enqueued_at` and a worker's start time
can be read the same way for all of them.

Peers (each with its documented defaults and with its best settings):
- rq-scheduler (`rqscheduler -i 60`, its default, and `-i 1`);
- RQ's own scheduler: `enqueue_at` for every slot, run by
  `rq worker --with-scheduler` (polls every second; no setting to change it);
- RQ cron (`rq cron`, rq >= 2.4, in its own virtualenv, created when missing);
  interval jobs only: its cron is minute-precision UTC, and its interval jobs
  start when the process starts, so they cannot be given our slots;
- APScheduler 3 with a RedisJobStore (defaults: misfire_grace_time 1 s,
  coalesce, max_instances 1, 10 threads; best: no misfire limit, no coalescing,
  20 threads).
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path

from benchmarks.common import REPO

QUEUE = "bench"
QUEUE_KEY = f"rq:queue:{QUEUE}"
READY_KEY = "benchmark:ready"
RQCRON_VENV = Path(os.environ.get("BTU_BENCH_RQCRON_VENV", "/tmp/rqcron-venv"))
BIN = Path(sys.executable).parent


@dataclass
class Schedule:
	i: int
	first: float
	period: float | None = None

	def slots(self, until: float) -> list[float]:
		if self.period is None:
			return [self.first] if self.first <= until else []
		out, k = [], 0
		while self.first + k * self.period <= until:
			out.append(self.first + k * self.period)
			k += 1
		return out


def utc_naive(epoch: float) -> datetime:
	return datetime.fromtimestamp(epoch, timezone.utc).replace(tzinfo=None)


def env() -> dict:
	return {**os.environ, "PYTHONPATH": str(REPO)}


def popen(cmd: list[str], log: Path | None = None) -> subprocess.Popen:
	out = open(log, "w") if log else subprocess.DEVNULL
	return subprocess.Popen(cmd, cwd=REPO, env=env(), stdout=out, stderr=subprocess.STDOUT)


class Peer:
	"""One peer in one configuration: `prepare` (write the schedules), `start`, `pid`, `stop`."""

	name = ""
	settings = ""
	can_periodic = True
	can_stagger = True  # can the peer be given each schedule's first slot?
	runs_worker = False  # does the peer need a worker to enqueue at all (RQ's own scheduler)?

	def __init__(self, redis_url: str, log_dir: Path):
		self.url = redis_url
		self.log_dir = log_dir
		self.processes: list[subprocess.Popen] = []

	def prepare(self, schedules: list[Schedule], until: float) -> None:
		raise NotImplementedError

	def start(self) -> None:
		raise NotImplementedError

	def ready(self, r, timeout: float = 300) -> None:
		"""Return once the peer has its schedules (the default: at once)."""

	@property
	def pid(self) -> int:
		return self.processes[0].pid

	def stop(self) -> None:
		for process in self.processes:
			if process.poll() is None:
				process.send_signal(signal.SIGTERM)
		for process in self.processes:
			try:
				process.wait(10)
			except subprocess.TimeoutExpired:
				process.kill()
				process.wait()
		self.processes = []

	def worker_command(self) -> list[str]:
		return [str(BIN / "rq"), "worker", "--url", self.url, "-w", "rq.worker.SimpleWorker", QUEUE]


class RqScheduler(Peer):
	name = "rq-scheduler"

	def __init__(self, redis_url: str, log_dir: Path, interval: float):
		super().__init__(redis_url, log_dir)
		self.interval = interval
		self.settings = f"-i {interval:g}" + (" (default)" if interval == 60 else " (best)")

	def prepare(self, schedules: list[Schedule], until: float) -> None:
		import redis
		from rq_scheduler import Scheduler

		scheduler = Scheduler(queue_name=QUEUE, connection=redis.Redis.from_url(self.url))
		for s in schedules:
			if s.period is None:
				scheduler.enqueue_at(utc_naive(s.first), "benchmarks.jobs.record", i=s.i)
			else:
				scheduler.schedule(
					utc_naive(s.first),
					"benchmarks.jobs.record",
					kwargs={"i": s.i},
					interval=s.period,
					repeat=None,
					result_ttl=600,
				)

	def start(self) -> None:
		self.processes = [
			popen(
				[str(BIN / "rqscheduler"), "--url", self.url, "-i", f"{self.interval:g}"],
				self.log_dir / "rqscheduler.log",
			)
		]


class RqOwnScheduler(Peer):
	name = "RQ enqueue_at"
	settings = "worker --with-scheduler (1 s poll, not configurable)"
	runs_worker = True

	def prepare(self, schedules: list[Schedule], until: float) -> None:
		import redis
		from rq import Queue

		queue = Queue(QUEUE, connection=redis.Redis.from_url(self.url))
		for s in schedules:
			for k, slot in enumerate(s.slots(until)):
				queue.enqueue_at(
					datetime.fromtimestamp(slot, timezone.utc),
					"benchmarks.jobs.record",
					i=s.i,
					job_id=f"rqat-{s.i}-{k}",
					result_ttl=600,
				)

	def start(self) -> None:
		self.processes = [
			popen(self.worker_command()[:-1] + ["--with-scheduler", QUEUE], self.log_dir / "rq-worker-scheduler.log")
		]


class RqCron(Peer):
	name = "RQ cron"
	settings = "interval jobs (cron is minute-precision)"
	can_stagger = False

	def prepare(self, schedules: list[Schedule], until: float) -> None:
		ensure_rqcron_venv()
		self.config = self.log_dir / "rq_cron_config.py"
		lines = ["from rq import cron", "from benchmarks.jobs import record", ""]
		for s in schedules:
			lines.append(
				f"cron.register(record, queue_name={QUEUE!r}, kwargs={{'i': {s.i}}}, "
				f"interval={int(s.period or 0)}, result_ttl=600)"
			)
		self.config.write_text("\n".join(lines) + "\n")

	def start(self) -> None:
		self.processes = [
			popen(
				[str(RQCRON_VENV / "bin" / "rq"), "cron", "--url", self.url, "--path", str(REPO), str(self.config)],
				self.log_dir / "rq-cron.log",
			)
		]

	def worker_command(self) -> list[str]:
		return [str(RQCRON_VENV / "bin" / "rq"), "worker", "--url", self.url, "-w", "rq.worker.SimpleWorker", QUEUE]


class APScheduler(Peer):
	name = "APScheduler 3"

	def __init__(self, redis_url: str, log_dir: Path, best: bool):
		super().__init__(redis_url, log_dir)
		self.best = best
		self.settings = (
			"no misfire limit, no coalesce, 20 threads (best)"
			if best
			else "misfire 1 s, coalesce, 10 threads (default)"
		)

	def prepare(self, schedules: list[Schedule], until: float) -> None:
		self.spec = self.log_dir / "aps_schedules.json"
		self.spec.write_text(json.dumps([[s.i, s.first, s.period] for s in schedules]))

	def start(self) -> None:
		cmd = [
			sys.executable,
			str(REPO / "benchmarks" / "aps_runner.py"),
			"--url",
			self.url,
			"--queue",
			QUEUE,
			"--schedules",
			str(self.spec),
		]
		self.processes = [popen(cmd + (["--best"] if self.best else []), self.log_dir / "apscheduler.log")]

	def ready(self, r, timeout: float = 300) -> None:
		deadline = time.monotonic() + timeout
		while not r.exists(READY_KEY):
			if self.processes[0].poll() is not None or time.monotonic() > deadline:
				raise RuntimeError(f"APScheduler did not load its schedules (see {self.log_dir / 'apscheduler.log'})")
			time.sleep(0.2)


def ensure_rqcron_venv() -> None:
	"""RQ cron needs rq >= 2.4, which Frappe v15's rq 1.15 is not: it gets a virtualenv of its own."""
	if (RQCRON_VENV / "bin" / "rq").exists():
		return
	subprocess.run([sys.executable, "-m", "venv", str(RQCRON_VENV)], check=True)
	subprocess.run([str(RQCRON_VENV / "bin" / "pip"), "install", "-q", "rq>=2.5"], check=True)


def all_peers(redis_url: str, log_dir: Path) -> list[Peer]:
	return [
		RqScheduler(redis_url, log_dir, 60),
		RqScheduler(redis_url, log_dir, 1),
		RqOwnScheduler(redis_url, log_dir),
		RqCron(redis_url, log_dir),
		APScheduler(redis_url, log_dir, best=False),
		APScheduler(redis_url, log_dir, best=True),
	]


def new_log_dir(name: str) -> Path:
	path = Path(tempfile.mkdtemp(prefix=f"btu-bench-{name}-"))
	return path


def remove_log_dir(path: Path) -> None:
	shutil.rmtree(path, ignore_errors=True)
