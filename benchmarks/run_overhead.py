"""What a run costs between its moment and its function's first line, inside a Frappe bench, beside `frappe.enqueue`.

Needs a Frappe bench with BTU installed (tier 2's); run it with the bench's Python from the repository root:

    /root/frappe-bench/env/bin/python benchmarks/run_overhead.py --bench /root/frappe-bench --site test.localhost

One `bench worker` (`frappe worker --queue default`, a forking rq worker: each job runs in a fresh work-horse forked
from it) runs the same declared function, `btu.btu_core.tests.sample_tasks.probe_start`, which records when its first
line ran, the work-horse's CPU until then and its RQ job. The kinds of run, each with a BTU scheduler running:

- `frappe.enqueue` of the function (the peer): from the enqueue to the first line;
- a Task run (an every-N-seconds schedule): from the slot's fire time;
- `btu.enqueue_at` without and with `task_log`: from the moment asked for;
- a chained run and a retry (BTU Run Requests): from the request's run_at;
- a Frappe Scheduled Job Type fired by BTU: BTU's job for a `frappe-job:` slot, enqueued by this script at the slot
  in the scheduler's form (the scheduler's own fire lag, about a millisecond, is `benchmarks/fire_lag.py`'s), from
  the slot.

Per kind: the start lag (moment to first line: p50 / p90 / max), split into fire lag (moment to the job's
`enqueued_at`), pickup (to rq's `started_at` in the work-horse) and inside the job; the work-horse's CPU to the first
line; and the worker's CPU per run (the worker process and its reaped work-horses, from /proc, over the kind's runs,
all of the run: after the call too). Then the same runs on an instrumented worker (this script's
`--step-worker`: rq's Worker whose work-horse times the steps) give the steps to the first line: Frappe's own job
setup, the import of the method's module, claim, Log insert, commits, alerts, capture, other SQL; and what follows
the call.

`--bytecode compiled` runs the workers with every module of the bench (standard library, site-packages, Frappe, BTU)
compiled into a private cache (PYTHONPYCACHEPREFIX, made once with compileall); `source` as on a bench that writes no
bytecode (PYTHONDONTWRITEBYTECODE=1, or built with uv): a private cache holding only the standard library's and
BTU's own (what BTU's migrate writes, `btu.btu_core.setup.install.compile_bytecode`), so Frappe and its libraries are
read from source whatever .pyc their trees hold. `both` (the default) runs one after the other. Only this bench's
Frappe version is measured; the output names it.

`--leader worker` fires every run from the worker's own scheduler candidate (issue 42: the scheduler inside Frappe's
workers) instead of a dedicated `btu-scheduler run`, for the start lag side by side with the default `dedicated`; the
step-timing worker is then not run (what a work-horse does does not depend on where the leader runs).

Holds the bench's tier-2 lock (`.btu-tier2.lock`) while it runs, so it never shares the worker with a test run.
Deletes what it makes. Prints tables, writes benchmarks/results/run_overhead.json.
"""

from __future__ import annotations

import argparse
import fcntl
import importlib
import json
import os
import signal
import statistics
import subprocess
import sys
import time
from contextlib import contextmanager, nullcontext
from datetime import datetime, timedelta, timezone
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

PROBE = "btu.btu_core.tests.sample_tasks.probe_start"
PROBES_KEY = "btu-benchmark-run-probes"  # sample_tasks.RUN_PROBES
FRAPPE_JOB_METHOD = "btu.btu_core.tests.sample_tasks.probe_scheduled_job"
TASK_RUNNER = "btu.btu_core.task_runner.run_scheduled_task"  # btu.shared.job_contract.TASK_RUNNER
QUEUE = "default"
KINDS = (
	"frappe.enqueue",
	"Task run",
	"enqueue_at",
	"enqueue_at task_log",
	"chained run",
	"retry",
	"Frappe job via BTU",
)
CACHE_PREFIX = Path("/tmp/btu-run-overhead-pycache")
SOURCE_PREFIX = Path("/tmp/btu-run-overhead-source-pycache")
STEP_LOG = Path("/tmp/btu-run-overhead-steps.jsonl")


# -- the workers ---------------------------------------------------------------------------


def worker_env(mode: str, candidate: bool = False) -> dict:
	# With `candidate` the worker's own scheduler candidate fires the runs (it leads: no other scheduler runs); else
	# the worker starts none and the runs are this script's dedicated scheduler's.
	env = {**os.environ, "PYTHONDONTWRITEBYTECODE": "1", "BTU_WORKER_CANDIDATE": "1" if candidate else "0"}
	if candidate:
		env["BTU_SCHEDULER_EXECUTOR"] = "frappe"
	env["PYTHONPYCACHEPREFIX"] = str(CACHE_PREFIX if mode == "compiled" else SOURCE_PREFIX)
	return env


def import_roots(python: str, sites: Path) -> list[str]:
	"""The folders the bench's Python imports from, BTU's package among them."""
	code = (
		"import sys, os, btu; "
		"print('\\n'.join([p for p in sys.path if os.path.isdir(p)] + [os.path.dirname(btu.__file__)]))"
	)
	out = subprocess.run([python, "-c", code], cwd=sites, capture_output=True, text=True, check=True).stdout
	return [line for line in out.splitlines() if line and Path(line).resolve() != sites.resolve()]


def compile_bytecode(python: str, sites: Path, mode: str) -> float:
	"""The mode's cache (compileall skips what is up to date): every module the bench can import when `compiled`; the
	standard library and BTU's package otherwise. Seconds."""
	started = time.monotonic()
	roots = import_roots(python, sites)
	# The BTU checkout holds virtualenvs beside its package: only the package itself.
	roots = [root for root in roots if not (Path(root) / "btu" / "__init__.py").exists()]
	if mode != "compiled":
		stdlib = subprocess.run(
			[python, "-c", "import sysconfig; print(sysconfig.get_paths()['stdlib'])"],
			capture_output=True,
			text=True,
			check=True,
		).stdout.strip()
		roots = [root for root in roots if root == stdlib or root.rstrip("/").endswith("/btu")]
	prefix = CACHE_PREFIX if mode == "compiled" else SOURCE_PREFIX
	subprocess.run(
		[python, "-m", "compileall", "-q", "-j", "0", *roots],
		cwd=sites,
		env={**os.environ, "PYTHONPYCACHEPREFIX": str(prefix)},
		stdout=subprocess.DEVNULL,
		check=False,
	)
	return time.monotonic() - started


@contextmanager
def worker_running(bench: Path, mode: str, step_worker: bool = False, candidate: bool = False):
	"""`frappe worker --queue default` (or this script's step-timing worker) under `mode`'s bytecode, with its
	scheduler candidate leading if `candidate`; yields its pid."""
	python = str(bench / "env" / "bin" / "python")
	if step_worker:
		command = [python, str(Path(__file__).resolve()), "--step-worker", "--bench", str(bench)]
	else:
		command = [python, "-m", "frappe.utils.bench_helper", "frappe", "worker", "--queue", QUEUE]
	log = open(f"/tmp/btu-run-overhead-worker-{mode}.log", "a")
	worker = subprocess.Popen(
		command, cwd=bench / "sites", env=worker_env(mode, candidate), stdout=log, stderr=subprocess.STDOUT
	)
	try:
		time.sleep(4)  # started and listening (a job queued earlier simply waits)
		if worker.poll() is not None:
			raise SystemExit(f"the worker exited with {worker.returncode}; see {log.name}")
		if candidate:
			wait_for_scheduler(worker, "the worker's candidate (logs/btu-scheduler-workers.log)")
		yield worker.pid
	finally:
		worker.terminate()
		worker.wait(30)


def wait_for_scheduler(process: subprocess.Popen, what: str, timeout: float = 30) -> None:
	"""Until a scheduler answers a ping (it leads or stands by, its RPC listener up)."""
	from btu.btu_core import scheduler_link
	from btu.shared import protocol

	deadline = time.monotonic() + timeout
	while not scheduler_link.send(protocol.PING).ok:
		if time.monotonic() > deadline or process.poll() is not None:
			raise SystemExit(f"{what} did not answer a ping within {timeout:.0f} s")
		time.sleep(0.2)


def cpu_secs(pid: int) -> float:
	"""A process's CPU, its own and its reaped children's (utime, stime, cutime, cstime)."""
	fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
	return sum(int(x) for x in fields[11:15]) / os.sysconf("SC_CLK_TCK")


# -- the step-timing worker (a subprocess: its imports are a fresh worker's) ---------------------------


class StepClock:
	"""Exclusive wall time per step in one work-horse: each wrapped call's time less the wrapped calls inside it, kept
	as (step, start, end) segments on the monotonic clock the probe stamps too, so they split at its first line."""

	def __init__(self):
		self.segments: list[tuple[str, float, float]] = []
		self.sql: list[float] = []
		self.commits: list[float] = []
		self.stack = ["other (Frappe's execute_job, rq, BTU's runner)"]
		self.since = time.perf_counter()

	def enter(self, step: str) -> None:
		now = time.perf_counter()
		self.segments.append((self.stack[-1], self.since, now))
		self.stack.append(step)
		self.since = now

	def leave(self) -> None:
		now = time.perf_counter()
		self.segments.append((self.stack.pop(), self.since, now))
		self.since = now

	def wrap(self, step: str, function):
		clock = self

		def timed(*args, **kwargs):
			clock.enter(step)
			try:
				return function(*args, **kwargs)
			finally:
				clock.leave()

		timed.__wrapped__ = function
		return timed


# (step, [dotted targets]): a target missing from this tree is left out (the steps follow the code as it changes).
STEP_TARGETS = [
	(
		"claim: lock and earlier Log",
		[
			"btu.btu_core.runs.slot_claim.SlotLock.__enter__",
			"btu.btu_core.runs.slot_claim.SlotLock.__exit__",
			"btu.btu_core.runs.task_run.TaskRun.earlier_log",
		],
	),
	(
		"Log insert / finish",
		[
			"frappe.model.document.Document.insert",
			"frappe.model.document.Document.save",
			"frappe.model.document.Document.db_insert",
		],
	),
	("alerts", ["btu.btu_core.alerts.run_events.run_started", "btu.btu_core.alerts.run_events.run_finished"]),
	("mail notifications", ["btu.btu_core.alerts.notifications.notify"]),
	(
		"request bookkeeping",
		[
			"btu.btu_core.runs.run_requests.load",
			"btu.btu_core.runs.run_requests.mark_done",
			"btu.btu_core.runs.backfills.release_next",
			"btu.btu_core.runs.retries.schedule_retry",
			"btu.btu_core.runs.chains.start_chained",
			"btu.btu_core.runs.run_requests.announce",
		],
	),
	(
		"outcome counts, monitor",
		["btu.btu_core.insights.metrics.record_outcome", "btu.btu_core.insights.metrics.add_to_monitor"],
	),
	(
		"resolve function, arguments",
		["btu.btu_core.runs.task_inputs.resolve_function", "btu.btu_core.runs.task_inputs.merge_arguments"],
	),
	("capture", ["btu.btu_core.runs.capture.call_captured"]),
	("load documents", ["frappe.get_doc", "frappe.get_cached_doc"]),
]


def resolve_target(dotted: str):
	"""(owner, attribute name, value) of a dotted module attribute or class attribute, or None."""
	parts = dotted.split(".")
	for cut in range(len(parts) - 1, 0, -1):
		module = sys.modules.get(".".join(parts[:cut]))
		if module is None:
			continue
		owner = module
		for name in parts[cut:-1]:
			owner = getattr(owner, name, None)
		if owner is not None and hasattr(owner, parts[-1]):
			return owner, parts[-1], getattr(owner, parts[-1])
		return None
	return None


def install_steps(clock: StepClock, targets) -> None:
	"""Wrap each target where it is defined and wherever a loaded module imported it by name."""
	for step, dotted_names in targets:
		for dotted in dotted_names:
			found = resolve_target(dotted)
			if found is None or getattr(found[2], "__wrapped__", None) is not None:
				continue
			owner, name, original = found
			timed = clock.wrap(step, original)
			setattr(owner, name, timed)
			if isinstance(owner, type):
				continue
			for module in list(sys.modules.values()):
				if (
					getattr(module, "__name__", "").startswith(("btu.", "frappe."))
					and module.__dict__.get(name) is original
				):
					setattr(module, name, timed)


def step_worker(bench: Path) -> None:
	"""A worker like `frappe worker --queue default` whose work-horses time their steps into STEP_LOG."""
	os.chdir(bench / "sites")
	import frappe
	from frappe.database.database import Database
	from frappe.utils.background_jobs import get_queue_list, get_redis_conn
	from rq import Worker

	class StepTimingWorker(Worker):
		def perform_job(self, job, queue):
			clock = StepClock()
			for name in ("init", "connect"):
				setattr(frappe, name, clock.wrap("Frappe job setup: init, connect", getattr(frappe, name)))
			get_attr = frappe.get_attr

			def timed_get_attr(path):
				try:
					return get_attr(path)
				finally:
					install_steps(clock, STEP_TARGETS)

			frappe.get_attr = timed_get_attr
			# Every module loaded on demand, wherever the import is (the method's module, or one a step imports late).
			bootstrap = importlib._bootstrap
			bootstrap._find_and_load = clock.wrap(
				"imports (modules loaded in the work-horse)", bootstrap._find_and_load
			)
			modules_before = set(sys.modules)
			sql, commit = Database.sql, Database.commit

			def timed_sql(db, *args, **kwargs):
				clock.sql.append(time.perf_counter())
				clock.enter("other SQL")
				try:
					return sql(db, *args, **kwargs)
				finally:
					clock.leave()

			def timed_commit(db, *args, **kwargs):
				clock.commits.append(time.perf_counter())
				clock.enter("commits")
				try:
					return commit(db, *args, **kwargs)
				finally:
					clock.leave()

			Database.sql, Database.commit = timed_sql, timed_commit
			try:
				return super().perform_job(job, queue)
			finally:
				clock.leave()
				with open(STEP_LOG, "a") as out:
					record = {"job_id": job.id, "segments": clock.segments, "sql": clock.sql, "commits": clock.commits}
					out.write(json.dumps({**record, "modules": sorted(set(sys.modules) - modules_before)}) + "\n")

	with frappe.init_site():
		connection = get_redis_conn()
		queues = get_queue_list([QUEUE], build_queue_name=True)
	StepTimingWorker(queues, connection=connection).work(logging_level="WARNING")


# -- the runs -------------------------------------------------------------------------------------


def utc(text: str | None) -> float | None:
	from btu.shared.instants import parse_utc_iso

	return parse_utc_iso(text, "moment").timestamp() if text else None


def probes(frappe, marker: str) -> list[dict]:
	return [json.loads(item) for item in frappe.cache().lrange(f"{PROBES_KEY}:{marker}", 0, -1)]


def request_moment(frappe, probe: dict) -> float | None:
	"""A run request's moment (run_at_utc), from the run its job names."""
	from btu.shared.job_contract import run_of

	return utc(frappe.db.get_value("BTU Run Request", run_of(probe["schedule"], probe["kind"]).name, "run_at_utc"))


def wait_for(frappe, marker: str, count: int, timeout: float) -> list[dict]:
	deadline = time.monotonic() + timeout
	while time.monotonic() < deadline:
		found = probes(frappe, marker)
		if len(found) >= count:
			return found
		time.sleep(0.2)
	found = probes(frappe, marker)
	print(f"warning: {marker}: {len(found)} of {count} runs within {timeout:.0f} s", file=sys.stderr)
	return found


def wait_idle(frappe, pid: int, timeout: float = 60) -> None:
	"""Until the worker has no job (the last run's work after its call included) and the queue is empty."""
	from frappe.utils.background_jobs import get_queue
	from rq import Worker

	queue = get_queue(QUEUE)
	deadline = time.monotonic() + timeout
	while time.monotonic() < deadline:
		busy = [w for w in Worker.all(connection=queue.connection) if w.pid == pid and w.get_state() != "idle"]
		if not busy and queue.count == 0:
			time.sleep(0.3)
			return
		time.sleep(0.2)


def whole_seconds_from_now(seconds: float) -> datetime:
	return (datetime.now(timezone.utc) + timedelta(seconds=seconds)).replace(microsecond=0)


def sleep_until(moment: datetime) -> None:
	time.sleep(max(0.0, (moment - datetime.now(timezone.utc)).total_seconds()))


def make_task(frappe, marker: str, **values) -> str:
	from btu.btu_core.tests.utils import make_task as insert_task

	arguments = {"marker": marker, **values.pop("arguments", {})}
	return insert_task(
		"probe_start", arguments=json.dumps(arguments), desc_short=f"run_overhead {marker}", **values
	).name


def every(frappe, task: str, seconds: int, start: datetime):
	from btu.btu_core.instants import to_system_naive

	return frappe.get_doc(
		{
			"doctype": "BTU Task Schedule",
			"task": task,
			"enabled": 1,
			"run_frequency": "Interval",
			"every": seconds,
			"every_unit": "Seconds",
			"time_zone": "UTC",
			"start_time": to_system_naive(start),  # a moment on the system zone's clock, as Frappe stores Datetimes
			"catch_up_policy": "skip",
		}
	).insert()


def stop(frappe, schedule) -> None:
	schedule.reload()
	schedule.enabled = 0
	schedule.save()
	frappe.db.commit()


class Runs:
	"""One pass over the kinds of run on the worker `pid`: (moment, probe) pairs per kind, and the worker's CPU per
	run."""

	def __init__(self, frappe, pid: int, runs: int, gap: int, tag: str):
		self.frappe, self.pid, self.runs, self.gap, self.tag = frappe, pid, runs, gap, tag
		self.made_tasks: list[str] = []
		self.results: dict[str, dict] = {}

	def marker(self, kind: str) -> str:
		return f"{self.tag}:{kind}:{time.time_ns()}"

	def measure(self, kind: str, start, collect, markers=lambda marker: [marker]) -> None:
		"""`start()` makes the runs and returns their probes' marker; `collect(marker)` their (moment, probe) pairs. The
		worker's CPU is divided by every run it made meanwhile: the probes under `markers(marker)`."""
		frappe = self.frappe
		wait_idle(frappe, self.pid)
		cpu_before = cpu_secs(self.pid)
		marker = start()
		found = collect(marker)
		wait_idle(frappe, self.pid)
		cpu = cpu_secs(self.pid) - cpu_before
		runs = sum(len(probes(frappe, each)) for each in markers(marker))
		self.results[kind] = {"pairs": found, "worker_cpu_per_run_ms": cpu * 1000 / max(1, runs)}

	def timeout(self) -> float:
		return self.runs * self.gap * 3 + 60

	def peer(self) -> None:
		frappe = self.frappe
		marker = self.marker("peer")

		def start():
			for _ in range(self.runs):
				frappe.enqueue(PROBE, queue=QUEUE, enqueue_after_commit=False, marker=marker)
				time.sleep(self.gap)
			return marker

		def collect(marker):
			return [(p["enqueued_at"], p) for p in wait_for(frappe, marker, self.runs, self.timeout())]

		self.measure("frappe.enqueue", start, collect)

	def task_run(self) -> None:
		frappe = self.frappe
		state = {}

		def start():
			marker = self.marker("task")
			task = make_task(frappe, marker)
			self.made_tasks.append(task)
			state["schedule"] = every(frappe, task, self.gap, whole_seconds_from_now(3))
			frappe.db.commit()
			return marker

		def collect(marker):
			found = wait_for(frappe, marker, self.runs, self.timeout())[: self.runs]
			stop(frappe, state["schedule"])
			return [(utc(p["fire_at"] or p["slot"]), p) for p in found]

		self.measure("Task run", start, collect)

	def enqueue_at(self, task_log: bool) -> None:
		import btu

		frappe = self.frappe

		def start():
			marker = self.marker("enqueue_at")
			first = whole_seconds_from_now(3) + timedelta(milliseconds=250)
			for i in range(self.runs):
				btu.enqueue_at(PROBE, first + timedelta(seconds=i * self.gap), task_log=task_log, marker=marker)
			frappe.db.commit()
			return marker

		def collect(marker):
			return [(request_moment(frappe, p), p) for p in wait_for(frappe, marker, self.runs, self.timeout())]

		self.measure("enqueue_at task_log" if task_log else "enqueue_at", start, collect)

	def chained(self) -> None:
		frappe = self.frappe
		state = {}

		def start():
			marker = self.marker("chain")
			after = make_task(frappe, marker)
			first = make_task(
				frappe, marker + ":parent", chained_tasks=[{"next_task": after, "on_outcome": "Any", "delay_secs": 0}]
			)
			self.made_tasks += [first, after]
			state["schedule"] = every(frappe, first, self.gap * 2, whole_seconds_from_now(3))
			frappe.db.commit()
			return marker

		def collect(marker):
			found = wait_for(frappe, marker, self.runs, self.timeout() * 2)[: self.runs]
			stop(frappe, state["schedule"])
			return [(request_moment(frappe, p), p) for p in found]

		self.measure("chained run", start, collect, markers=lambda marker: [marker, marker + ":parent"])

	def retry(self) -> None:
		frappe = self.frappe
		state = {}

		def start():
			marker = self.marker("retry")
			task = make_task(frappe, marker, arguments={"fail_first_attempt": True}, max_attempts=2, retry_delay_secs=0)
			self.made_tasks.append(task)
			state["schedule"] = every(frappe, task, self.gap * 2, whole_seconds_from_now(3))
			frappe.db.commit()
			return marker

		def collect(marker):
			deadline = time.monotonic() + self.timeout() * 2
			while time.monotonic() < deadline:
				retries = [p for p in probes(frappe, marker) if p.get("kind") == "run-request"]
				if len(retries) >= self.runs:
					break
				time.sleep(0.2)
			stop(frappe, state["schedule"])
			return [(request_moment(frappe, p), p) for p in retries[: self.runs]]

		self.measure("retry", start, collect)

	def frappe_job(self) -> None:
		"""BTU's job for a Scheduled Job Type's slot, in the scheduler's form (execute_job of the task runner, as
		Administrator), enqueued at the slot; the Scheduled Job Type is Yearly, so nothing else fires it meanwhile."""
		from btu.shared.job_contract import runner_kwargs
		from btu.shared.run_kind import RunKey, RunKind

		frappe = self.frappe
		marker = "frappe-job"

		def start():
			frappe.cache().delete_value(f"{PROBES_KEY}:{marker}")
			name = frappe.db.get_value("Scheduled Job Type", {"method": FRAPPE_JOB_METHOD})
			if not name:
				name = (
					frappe.get_doc(
						{
							"doctype": "Scheduled Job Type",
							"method": FRAPPE_JOB_METHOD,
							"frequency": "Yearly",
							"create_log": 0,
						}
					)
					.insert(ignore_permissions=True)
					.name
				)
			frappe.db.set_value("Scheduled Job Type", name, "last_execution", None)
			frappe.db.commit()
			slot = whole_seconds_from_now(2)
			for _ in range(self.runs):
				sleep_until(slot)
				frappe.enqueue(
					TASK_RUNNER,
					queue=QUEUE,
					enqueue_after_commit=False,
					**runner_kwargs("", RunKey(RunKind.FRAPPE_JOB, name), slot, slot),
				)
				slot += timedelta(seconds=self.gap)
			return marker

		def collect(marker):
			return [(utc(p["slot"]), p) for p in wait_for(frappe, marker, self.runs, self.timeout())]

		self.measure("Frappe job via BTU", start, collect)

	def all(self, kinds) -> None:
		makers = {
			"frappe.enqueue": self.peer,
			"Task run": self.task_run,
			"enqueue_at": lambda: self.enqueue_at(False),
			"enqueue_at task_log": lambda: self.enqueue_at(True),
			"chained run": self.chained,
			"retry": self.retry,
			"Frappe job via BTU": self.frappe_job,
		}
		for kind in kinds:
			makers[kind]()

	def clean(self) -> None:
		frappe = self.frappe
		frappe.db.rollback()
		frappe.db.delete("BTU Run Request", {"task": ("in", self.made_tasks)})
		frappe.db.delete("BTU Run Request", {"method": PROBE})
		frappe.db.delete("BTU Task Log", {"task": ("in", self.made_tasks)})
		frappe.db.delete("BTU Task Log", {"method": PROBE})
		for task in self.made_tasks:
			for schedule in frappe.get_all("BTU Task Schedule", filters={"task": task}, pluck="name"):
				frappe.delete_doc("BTU Task Schedule", schedule, force=True, ignore_permissions=True)
		for task in reversed(self.made_tasks):
			frappe.delete_doc("BTU Task", task, force=True, ignore_permissions=True)
		for name in frappe.get_all("Scheduled Job Type", filters={"method": FRAPPE_JOB_METHOD}, pluck="name"):
			frappe.db.delete("Scheduled Job Log", {"scheduled_job_type": name})
			frappe.delete_doc("Scheduled Job Type", name, force=True, ignore_permissions=True)
		frappe.db.commit()
		frappe.cache().delete_keys(f"{PROBES_KEY}:{self.tag}:")


# -- figures ----------------------------------------------------------------------------------------


def ms_summary(values: list[float]) -> dict:
	from common import lag_summary

	return lag_summary(values)


def lag_rows(results: dict) -> list[dict]:
	rows = []
	for kind in KINDS:
		if kind not in results:
			continue
		pairs = [(moment, p) for moment, p in results[kind]["pairs"] if moment is not None]
		start = [(p["first_line"] - moment) * 1000 for moment, p in pairs]
		fire = [(p["enqueued_at"] - moment) * 1000 for moment, p in pairs if p["enqueued_at"]]
		pickup = [(p["started_at"] - p["enqueued_at"]) * 1000 for _, p in pairs if p["started_at"] and p["enqueued_at"]]
		inside = [(p["first_line"] - p["started_at"]) * 1000 for _, p in pairs if p["started_at"]]
		rows.append(
			{
				"kind": kind,
				"runs": len(pairs),
				"start_lag": ms_summary(start),
				"fire_lag_p50_ms": statistics.median(fire) if fire else None,
				"pickup_p50_ms": statistics.median(pickup) if pickup else None,
				"in_job_to_first_line_p50_ms": statistics.median(inside) if inside else None,
				"horse_cpu_to_first_line_p50_ms": statistics.median(p["cpu"] * 1000 for _, p in pairs)
				if pairs
				else None,
				"modules_at_first_line_p50": statistics.median(p["modules"] for _, p in pairs) if pairs else None,
				"worker_cpu_per_run_ms": results[kind]["worker_cpu_per_run_ms"],
			}
		)
	return rows


def step_rows(results: dict, steps_by_job: dict) -> dict:
	"""Per kind, the median ms per step before the first line and after it, and SQL statements and commits before it."""
	out = {}
	for kind in KINDS:
		if kind not in results:
			continue
		before: dict[str, list[float]] = {}
		after: list[float] = []
		sql_before, commits_before = [], []
		for _, probe in results[kind]["pairs"]:
			record = steps_by_job.get(probe["job_id"])
			if record is None:
				continue
			line = probe["monotonic"]
			totals: dict[str, float] = {}
			tail = 0.0
			for step, begin, end in record["segments"]:
				totals[step] = totals.get(step, 0.0) + max(0.0, min(end, line) - begin)
				tail += max(0.0, end - max(begin, line))
			for step, value in totals.items():
				before.setdefault(step, []).append(value * 1000)
			after.append(tail * 1000)
			sql_before.append(sum(1 for t in record["sql"] if t < line))
			commits_before.append(sum(1 for t in record["commits"] if t < line))
		runs = len(after)
		out[kind] = {
			"runs": runs,
			"before_first_line_ms": {step: sum(values) / runs for step, values in before.items()} if runs else {},
			"after_call_ms": statistics.median(after) if after else None,
			"sql_before_first_line": statistics.median(sql_before) if sql_before else None,
			"commits_before_first_line": statistics.median(commits_before) if commits_before else None,
		}
	return out


def print_mode(mode: str, note: str, rows: list[dict], steps: dict) -> None:
	from common import table

	print(f"\n== {mode}: {note}")
	print(
		table(
			[
				"kind",
				"runs",
				"start p50 ms",
				"p90",
				"max",
				"fire lag p50",
				"pickup p50",
				"in job to 1st line p50",
				"horse CPU to 1st line ms",
				"worker CPU/run ms",
				"x peer CPU",
				"modules at 1st line",
			],
			[
				[
					r["kind"],
					r["runs"],
					r["start_lag"]["p50_ms"],
					r["start_lag"]["p90_ms"],
					r["start_lag"]["max_ms"],
					r["fire_lag_p50_ms"],
					r["pickup_p50_ms"],
					r["in_job_to_first_line_p50_ms"],
					r["horse_cpu_to_first_line_p50_ms"],
					r["worker_cpu_per_run_ms"],
					r["worker_cpu_per_run_ms"] / rows[0]["worker_cpu_per_run_ms"]
					if rows and rows[0]["worker_cpu_per_run_ms"]
					else None,
					r["modules_at_first_line_p50"],
				]
				for r in rows
			],
		)
	)
	if not steps:
		return
	names = sorted(
		{step for kind in steps.values() for step in kind["before_first_line_ms"]},
		key=lambda s: (s.startswith("other"), s),
	)
	kinds = [kind for kind in KINDS if kind in steps]
	body = [[name, *[steps[k]["before_first_line_ms"].get(name, 0.0) for k in kinds]] for name in names]
	body.append(["= to the first line (sum)", *[sum(steps[k]["before_first_line_ms"].values()) for k in kinds]])
	body.append(["SQL statements before it", *[steps[k]["sql_before_first_line"] for k in kinds]])
	body.append(["commits before it", *[steps[k]["commits_before_first_line"] for k in kinds]])
	body.append(["after the call (Log end, sequels)", *[steps[k]["after_call_ms"] for k in kinds]])
	counts = ", ".join(f"{kind}: {steps[kind]['runs']}" for kind in kinds)
	print(f"\nsteps on the instrumented worker, mean ms per run from the fork ({counts} runs)")
	print(table(["step", *kinds], body))


@contextmanager
def tier2_lock(bench: Path):
	"""The bench to this run alone, once its btu app is this tree: a tier-2 run from another checkout links its own."""
	with open(bench / ".btu-tier2.lock", "a") as handle:
		try:
			fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
		except BlockingIOError:
			print(f"waiting for {bench / '.btu-tier2.lock'} (a tier-2 run holds it)", file=sys.stderr)
			fcntl.flock(handle, fcntl.LOCK_EX)
		require_this_tree(bench)
		yield


def require_this_tree(bench: Path) -> None:
	"""Exit unless the bench's workers import btu from this tree (apps/btu and the editable install)."""
	tree = Path(__file__).resolve().parent.parent
	imported = subprocess.run(
		[
			str(bench / "env" / "bin" / "python"),
			"-c",
			"import btu, os; print(os.path.dirname(os.path.dirname(os.path.realpath(btu.__file__))))",
		],
		cwd=bench / "sites",
		capture_output=True,
		text=True,
	).stdout.strip()
	linked = (bench / "apps" / "btu").resolve()
	if {Path(imported or "?"), linked} != {tree}:
		sys.exit(
			f"the bench's btu is {linked} (imported from {imported or '?'}), not this tree {tree}: "
			"run scripts/tier2 from this tree once (it links it), then this again"
		)


def run_mode(frappe, bench: Path, mode: str, runs: int, step_runs: int, gap: int, kinds, leader: str) -> dict:
	python = str(bench / "env" / "bin" / "python")
	sites = bench / "sites"
	secs = compile_bytecode(python, sites, mode)
	if mode == "compiled":
		note = f"bytecode compiled for every module (PYTHONPYCACHEPREFIX={CACHE_PREFIX}, compileall {secs:.0f} s)"
	else:
		note = (
			"no bytecode for Frappe and its libraries, as a bench built with uv or under PYTHONDONTWRITEBYTECODE=1: "
			"only the "
			f"standard library's and BTU's own (what BTU's migrate writes) in PYTHONPYCACHEPREFIX={SOURCE_PREFIX}"
		)
	with worker_running(bench, mode, candidate=leader == "worker") as pid:
		warm = Runs(frappe, pid, 1, 1, f"{mode}:warm")
		warm.peer()
		measured = Runs(frappe, pid, runs, gap, mode)
		try:
			measured.all(kinds)
		finally:
			measured.clean()
	STEP_LOG.unlink(missing_ok=True)
	timed = Runs(frappe, 0, 0, gap, f"{mode}:steps")
	if leader == "dedicated":
		with worker_running(bench, mode, step_worker=True) as pid:
			timed = Runs(frappe, pid, step_runs, gap, f"{mode}:steps")
			try:
				timed.all(kinds)
			finally:
				timed.clean()
	steps_by_job = {}
	if STEP_LOG.exists():
		for line in STEP_LOG.read_text().splitlines():
			record = json.loads(line)
			steps_by_job[record["job_id"]] = record
	rows = lag_rows(measured.results)
	steps = step_rows(timed.results, steps_by_job)
	print_mode(mode, note, rows, steps)
	return {"bytecode": note, "runs": rows, "steps": steps}


def main() -> None:
	parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
	parser.add_argument("--bench", type=Path, default=Path(os.environ.get("BTU_BENCH", Path.home() / "frappe-bench")))
	parser.add_argument("--site", default=os.environ.get("BTU_SITE", "test.localhost"))
	parser.add_argument("--bytecode", choices=("compiled", "source", "both"), default="both")
	parser.add_argument("--runs", type=int, default=10, help="runs per kind on the real worker")
	parser.add_argument("--step-runs", type=int, default=4, help="runs per kind on the step-timing worker")
	parser.add_argument(
		"--gap-secs",
		type=int,
		default=0,
		help=(
			"seconds between runs (a schedule's interval); default 2 compiled, 5 from source "
			"(a run must end before the next)"
		),
	)
	parser.add_argument(
		"--kinds", default=",".join(KINDS), help=f"comma-separated, from {', '.join(KINDS)} (the first is the peer)"
	)
	parser.add_argument(
		"--leader",
		choices=("dedicated", "worker"),
		default="dedicated",
		help="what fires the runs: a dedicated btu-scheduler (default) or the worker's own candidate",
	)
	parser.add_argument("--step-worker", action="store_true", help=argparse.SUPPRESS)
	args = parser.parse_args()
	# A SIGTERM unwinds as an exit does, so the workers, the scheduler and the rows made are removed.
	signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
	bench = args.bench.resolve()
	if args.step_worker:
		return step_worker(bench)
	from common import connect_site, write_result
	from enqueue_at import scheduler_running

	frappe = connect_site(bench, args.site)
	version = f"Frappe {frappe.__version__}, Python {sys.version.split()[0]}, rq {__import__('rq').__version__}"
	leader = "a dedicated BTU scheduler" if args.leader == "dedicated" else "the worker's own scheduler candidate"
	print(f"{version}; one `frappe worker --queue {QUEUE}`, the runs fired by {leader} (frappe executor)")
	modes = ["compiled", "source"] if args.bytecode == "both" else [args.bytecode]
	kinds = [kind for kind in KINDS if kind in args.kinds.split(",")]
	out = {"frappe": version, "leader": args.leader, "modes": {}}
	with tier2_lock(bench), scheduler_running(bench) if args.leader == "dedicated" else nullcontext():
		for mode in modes:
			gap = args.gap_secs or (2 if mode == "compiled" else 5)
			out["modes"][mode] = run_mode(frappe, bench, mode, args.runs, args.step_runs, gap, kinds, args.leader)
	path = write_result("run_overhead" if args.leader == "dedicated" else "run_overhead_worker_leader", out)
	print(f"\n(written to {path})")
	frappe.destroy()


if __name__ == "__main__":
	main()
