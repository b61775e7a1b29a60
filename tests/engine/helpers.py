"""What the engine tests share: scheduler and worker processes, waiting, reading what was enqueued.

Every scheduler is a real `python -m btu.scheduler_daemon run` subprocess and
every worker a real `rq worker`, both run from the repository root so the
worker imports `tests.engine.tasks`.
"""

from __future__ import annotations

import fcntl
import json
import os
import signal
import subprocess
import sys
import time
from collections import Counter, defaultdict
from datetime import datetime, timezone
from pathlib import Path

from rq.job import JobStatus

from btu.scheduler_daemon.store import jobs
from btu.shared import protocol
from tests.support.keys import KEYS
from tests.support.slack import patient

REPO = Path(__file__).resolve().parents[2]
ONE_SECOND = "* * * * * *"
FIGURES_FILE = Path(os.environ.get("BTU_ENGINE_FIGURES", f"/tmp/btu-engine-figures-{Path(sys.prefix).name}.json"))


def child_env() -> dict[str, str]:
	"""The environment of a child process: the repo importable, no scheduler configuration leaking in."""
	env = {k: v for k, v in os.environ.items() if not k.startswith(("BTU_SCHEDULER_", "FRAPPE_"))}
	env["BTU_SCHEDULER_CONFIG"] = str(REPO / "tests" / "engine" / "no-such-config.toml")
	env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO), env.get("PYTHONPATH")]))
	env["PYTHONUNBUFFERED"] = "1"
	return env


def report(title: str, text: str) -> None:
	"""A measured figure: printed now (-s) and kept in FIGURES_FILE, which pytest's closing summary reads
	(the summary is the pytest-xdist controller's, and the figures are measured in its workers)."""
	print(f"\n[{title}] {text}")
	with open(FIGURES_FILE.with_suffix(".lock"), "w") as lock:
		fcntl.flock(lock, fcntl.LOCK_EX)
		try:
			stored = json.loads(FIGURES_FILE.read_text()) if FIGURES_FILE.exists() else {}
		except ValueError:
			stored = {}
		stored[title] = {"text": text, "at": datetime.now(timezone.utc).isoformat(), "python": sys.executable}
		FIGURES_FILE.write_text(json.dumps(stored, indent=1, sort_keys=True))


def reported_since(moment: datetime) -> list[tuple[str, str]]:
	"""The figures reported at or after `moment`, by title."""
	try:
		stored = json.loads(FIGURES_FILE.read_text()) if FIGURES_FILE.exists() else {}
	except ValueError:
		return []
	return sorted(
		(title, entry["text"]) for title, entry in stored.items() if datetime.fromisoformat(entry["at"]) >= moment
	)


def percentile(values: list[float], q: float) -> float:
	ordered = sorted(values)
	return ordered[min(len(ordered) - 1, max(0, round(q / 100 * (len(ordered) - 1))))]


def wait_until(predicate, timeout: float, message: str, interval: float = 0.05):
	"""Poll `predicate` until it returns something truthy (returned) or `timeout` seconds (times the slack) pass."""
	timeout = patient(timeout)
	deadline = time.monotonic() + timeout
	while True:
		value = predicate()
		if value:
			return value
		if time.monotonic() > deadline:
			raise AssertionError(f"timed out after {timeout} s: {message}")
		time.sleep(interval)


def wait_while_progressing(predicate, progress, stall: float, message: str, interval: float = 0.2):
	"""Poll `predicate` until it returns something truthy (returned); give up only once `progress()` has
	not changed for `stall` seconds (times the slack). For waits as long as a backlog takes to drain on a
	loaded machine, which is no property of the code under test."""
	stall = patient(stall)
	last, changed_at = progress(), time.monotonic()
	while True:
		value = predicate()
		if value:
			return value
		now = progress()
		if now != last:
			last, changed_at = now, time.monotonic()
		elif time.monotonic() - changed_at > stall:
			raise AssertionError(f"no progress for {stall} s (at {now!r}): {message}")
		time.sleep(interval)


def heartbeating_pids(r) -> set[int]:
	"""The pids in the process list (members "<host>:<pid>:<id>")."""
	return {int(text(member).split(":")[1]) for member in r.zrange(KEYS.processes, 0, -1)}


def wait_until_serving(r, processes: Processes, timeout: float = 30) -> None:
	"""Every running scheduler has written its first heartbeat, so it handles SIGTERM (a process still
	importing dies of it instead)."""
	wait_until(
		lambda: {s.pid for s in processes.running()} <= heartbeating_pids(r),
		timeout,
		f"every scheduler's first heartbeat\n{processes.logs()}",
	)


# -- processes ------------------------------------------------------------------------


class SchedulerProcess:
	"""`btu-scheduler run` as a subprocess, its output in `log_path`."""

	def __init__(self, bench_path: Path, log_path: Path, executor: str = "rq", flags: tuple[str, ...] = ()):
		self.log_path = log_path
		self.command = [
			sys.executable, "-m", "btu.scheduler_daemon", "run", "--bench", str(bench_path),
			"--executor", executor, "--log-level", "INFO", *flags,
		]  # fmt: skip
		with open(log_path, "ab") as log:
			self.process = subprocess.Popen(
				self.command, stdout=log, stderr=subprocess.STDOUT, cwd=REPO, env=child_env()
			)

	@property
	def pid(self) -> int:
		return self.process.pid

	def alive(self) -> bool:
		return self.process.poll() is None

	def signal(self, signum: int) -> None:
		if self.alive():
			self.process.send_signal(signum)

	def stop(self, timeout: float = 10) -> int | None:
		"""SIGTERM, then SIGKILL after `timeout` seconds; the exit code. A scheduler that did not stop prints its
		threads' stacks to its log first (SIGUSR1), so that the failure says where it hung."""
		self.signal(signal.SIGTERM)
		try:
			return self.process.wait(patient(timeout))
		except subprocess.TimeoutExpired:
			self.signal(signal.SIGUSR1)
			time.sleep(0.5)
			self.process.kill()
			return self.process.wait()

	def kill(self) -> None:
		self.signal(signal.SIGKILL)
		self.process.wait()

	def log(self) -> str:
		return self.log_path.read_text(errors="replace") if self.log_path.exists() else ""

	def tail(self, lines: int = 40) -> str:
		return "\n".join(self.log().splitlines()[-lines:])


class Processes:
	"""Schedulers and workers a test started; `close` ends each one (by its own pid)."""

	def __init__(self, log_dir: Path):
		self.log_dir = log_dir
		self.schedulers: list[SchedulerProcess] = []
		self.workers: list[subprocess.Popen] = []

	def scheduler(self, bench_path: Path, *flags: str, executor: str = "rq") -> SchedulerProcess:
		path = self.log_dir / f"scheduler-{len(self.schedulers) + 1}.log"
		process = SchedulerProcess(bench_path, path, executor=executor, flags=flags)
		self.schedulers.append(process)
		return process

	def worker(
		self, redis_url: str, *queues: str, burst: bool = False, extra: list[str] | None = None, restart: bool = False
	) -> subprocess.Popen:
		"""`restart`: started again whenever it exits (tests.support.keep_running), as supervisor does."""
		rq_script = Path(sys.executable).parent / "rq"
		command = [str(rq_script)] if rq_script.exists() else [sys.executable, "-m", "rq.cli"]
		if restart:
			command = [sys.executable, "-m", "tests.support.keep_running", *command]
		where = ["--url", redis_url] if redis_url else []
		command += ["worker", *where, "--path", str(REPO), *(extra or []), *(["--burst"] if burst else []), *queues]
		log = open(self.log_dir / f"worker-{len(self.workers) + 1}.log", "ab")
		worker = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT, cwd=REPO, env=child_env())
		log.close()
		self.workers.append(worker)
		return worker

	def sentinel_worker(self, sentinels: list[tuple[str, int]], service: str, *queues: str) -> subprocess.Popen:
		"""An `rq worker` that finds its Redis through Sentinel, as Frappe's workers do (rq's SENTINEL setting)."""
		name = f"rq_sentinel_{len(self.workers) + 1}"
		(self.log_dir / f"{name}.py").write_text(
			f"SENTINEL = {{'INSTANCES': {sentinels!r}, 'MASTER_NAME': {service!r}, 'SOCKET_TIMEOUT': 5}}\n"
		)
		return self.worker("", *queues, extra=["--config", name, "--path", str(self.log_dir)], restart=True)

	def running(self) -> list[SchedulerProcess]:
		return [s for s in self.schedulers if s.alive()]

	def by_pid(self, pid: int) -> SchedulerProcess | None:
		return next((s for s in self.schedulers if s.pid == pid), None)

	def logs(self) -> str:
		return "\n".join(f"--- {s.log_path.name} (pid {s.pid})\n{s.tail()}" for s in self.schedulers)

	def close(self) -> None:
		for worker in self.workers:
			if worker.poll() is None:
				worker.terminate()
		for scheduler in self.schedulers:
			if scheduler.alive():
				scheduler.kill()
		for worker in self.workers:
			try:
				worker.wait(patient(10))
			except subprocess.TimeoutExpired:
				worker.kill()
				worker.wait()


def stop_worker(worker: subprocess.Popen, timeout: float = 15) -> None:
	"""A warm shutdown: the worker finishes its current job, then exits."""
	if worker.poll() is None:
		worker.send_signal(signal.SIGTERM)
		try:
			worker.wait(patient(timeout))
		except subprocess.TimeoutExpired:
			worker.kill()
			worker.wait()


def cli(bench_path: Path, *args: str, timeout: float = 30) -> subprocess.CompletedProcess:
	command = [sys.executable, "-m", "btu.scheduler_daemon", *args, "--bench", str(bench_path)]
	return subprocess.run(command, capture_output=True, text=True, cwd=REPO, env=child_env(), timeout=patient(timeout))


def status_json(bench_path: Path) -> dict:
	"""`btu-scheduler status --json` (exit 1 only means no leader; the JSON is printed anyway)."""
	done = cli(bench_path, "status", "--json")
	assert done.returncode in (0, 1), f"status failed ({done.returncode}): {done.stderr}"
	return json.loads(done.stdout)


# -- reading Redis ------------------------------------------------------------------------


def text(value) -> str:
	return value.decode() if isinstance(value, bytes) else value


def lease(r) -> tuple[int, int] | None:
	"""(epoch, pid) of the leader, from the lease value "<epoch>|<host>:<pid>:<id>"."""
	value = text(r.get(KEYS.leader))
	if not value:
		return None
	epoch, _, holder = value.partition("|")
	return int(epoch), int(holder.split(":")[1])


def wait_for_leader(r, processes: Processes, timeout: float = 20, other_than: int | None = None) -> SchedulerProcess:
	def leader():
		current = lease(r)
		if current and current[1] != other_than:
			return processes.by_pid(current[1])
		return None

	return wait_until(leader, timeout, f"no scheduler took the lease\n{processes.logs()}", interval=0.005)


def queue_key(bench, queue_type: str = "default") -> str:
	return f"rq:queue:{bench.queue_name(queue_type)}"


def queue_ids(r, key: str) -> list[str]:
	return [text(i) for i in r.lrange(key, 0, -1)]


def parse_job_id(job_id: str) -> tuple[str, int]:
	"""(schedule, slot in epoch ms) from a BTU job id."""
	_, schedule, slot = jobs.parse_job_id(job_id)
	return schedule, round(slot.timestamp() * 1000)


def released_job_hash(
	shape: jobs.JobShape, schedule: str, slot: datetime, fire_at: datetime, created_at: datetime, enqueued_at: datetime
) -> dict:
	"""A fire's whole job hash once released, from its JobShape, as the prepare and release scripts write it."""
	description, data = shape.fire_fields(schedule, slot, fire_at)
	return {
		**shape.fields,
		"created_at": jobs.rq_time(created_at),
		"enqueued_at": jobs.rq_time(enqueued_at),
		"status": JobStatus.QUEUED.value,
		"description": description,
		"data": data,
	}


def rq_job_hash(
	shape: jobs.JobShape, schedule: str, slot: datetime, fire_at: datetime, created_at: datetime, enqueued_at: datetime
) -> dict:
	"""The same hash made the slow way: rq's own to_dict() of a whole rq Job."""
	job = shape.rq_job(
		shape.kwargs(schedule, slot, fire_at),
		jobs.job_id(shape.site, schedule, slot),
		shape.description(schedule, slot),
	)
	job.created_at = created_at.astimezone(timezone.utc)
	job.enqueued_at = enqueued_at.astimezone(timezone.utc)
	return job.to_dict()


def slots_by_schedule(ids: list[str]) -> dict[str, list[int]]:
	slots: dict[str, list[int]] = defaultdict(list)
	for job_id in ids:
		schedule, slot = parse_job_id(job_id)
		slots[schedule].append(slot)
	return slots


def duplicates(ids: list[str]) -> list[str]:
	return [job_id for job_id, count in Counter(ids).items() if count > 1]


def gaps(slots: list[int], step_ms: int = 1000) -> list[tuple[int, int]]:
	"""Pairs of neighbouring slots (sorted) further apart than one step."""
	ordered = sorted(set(slots))
	return [(a, b) for a, b in zip(ordered, ordered[1:]) if b - a != step_ms]


def recent_fires(r, site: str) -> list[dict]:
	"""The site's recent fires, oldest first."""
	return [json.loads(f) for f in reversed(r.lrange(KEYS.recent_fires_key(site), 0, -1))]


def counters(r, site: str) -> dict[str, int]:
	return {text(k): int(v) for k, v in r.hgetall(KEYS.counters_key(site)).items()}


def definition(r, site: str, name: str) -> tuple[str, str] | None:
	"""The schedule's (spec, job template) JSON as the state keeps them, None when it holds none."""
	stored = r.get(KEYS.definition_key(site, name))
	if stored is None:
		return None
	spec, _, job = text(stored).partition("\n")
	return spec, job


def state_names(r, site: str) -> set[str]:
	return {text(n) for n in r.smembers(KEYS.site_schedules_key(site))}


def redis_ms(r) -> int:
	seconds, micros = r.time()
	return seconds * 1000 + micros // 1000
