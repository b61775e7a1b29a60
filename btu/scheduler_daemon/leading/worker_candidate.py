"""The scheduler candidate of a Frappe worker: started by `bench worker`, ended with it.

Frappe Cloud, frappe_docker and Helm run Frappe's workers and no process of an app's own, so BTU fires where
they run by riding them: `bench worker` imports every app's commands module before it starts working
(btu/commands.py), and there the worker starts `btu-scheduler run --for-worker <its pid>` as its child. The
candidate is a process, not a thread of the worker: rq forks a work-horse for every job, and a horse must inherit
no lock, socket or leader's state, which a fresh process never shares. It competes for the bench's lease like any
scheduler and yields it to a dedicated one (`bench btu-scheduler`, where one runs: candidacy.Candidacy); it exits
when the worker does, told by the kernel (the parent-death signal, SIGTERM) or, failing that, by its parent
changing (`ParentWatch`); either way it hands the lease over as a dedicated scheduler does on SIGTERM. One that
ended while its worker lives is started again at the worker's next maintenance (`Candidate.ensure`).

Off with `"btu_scheduler_in_workers": false` in common_site_config.json, or BTU_WORKER_CANDIDATE=0 in a worker's
environment. A `--burst` worker starts none (it ends when its queues are empty).
"""

from __future__ import annotations

import ctypes
import functools
import json
import logging
import os
import signal
import subprocess
import sys
import threading
from pathlib import Path

from btu.scheduler_daemon import log

SETTING = "btu_scheduler_in_workers"
# The same, for one process and what it starts (a service's environment, a test): over the bench's setting. Not a
# BTU_SCHEDULER_* name: the scheduler reads each of those as its configuration, and refuses one it does not know.
ENV = "BTU_WORKER_CANDIDATE"
WORKER_COMMANDS = frozenset({"worker", "worker-pool"})
LOG_NAME = "btu-scheduler-workers.log"
# prctl(2): the signal a process gets when its parent dies.
PR_SET_PDEATHSIG = 1
# How often a candidate looks at its parent: the parent-death signal is the prompt way; this catches the rest well
# within a lease's time, at a wake a standby can afford.
WATCH_SECS = 2.0


def enabled(common_config: dict, environ=os.environ) -> bool:
	"""The setting: on unless $BTU_WORKER_CANDIDATE, else common_site_config.json, says false (or 0, "false",
	"no", "off")."""
	value = environ[ENV] if environ.get(ENV) is not None else common_config.get(SETTING, True)
	if isinstance(value, str):
		return value.strip().lower() not in ("0", "false", "no", "off", "")
	return bool(value)


def wanted(argv: list[str]) -> bool:
	"""Whether this process is a long-lived Frappe worker (`bench worker`, `bench worker-pool`, not `--burst`)."""
	return not WORKER_COMMANDS.isdisjoint(argv[1:]) and "--burst" not in argv


def start(bench_path: str | Path, worker_pid: int | None = None) -> Candidate | None:
	"""Start the candidate of the worker `worker_pid` (this process by default); None when the setting turns
	candidates off."""
	bench = Path(bench_path)
	try:
		common = json.loads((bench / "sites" / "common_site_config.json").read_text())
	except (OSError, ValueError):
		common = {}
	if not enabled(common):
		return None
	candidate = Candidate(bench, worker_pid or os.getpid())
	candidate.spawn()
	return candidate


class Candidate:
	"""A worker's candidate process, its output appended to the bench's logs/btu-scheduler-workers.log.

	One that ended while its worker lives (killed by the OOM killer or by hand) is started again at the worker's next
	maintenance (`restart_at_maintenance`: rq's run_maintenance_tasks, every 10 minutes between jobs, where rq restarts
	its own scheduler and Frappe v16 its own), by the worker's main thread: no thread is added to the worker."""

	def __init__(self, bench: Path, worker_pid: int):
		self.bench = bench
		self.worker_pid = worker_pid
		self.process: subprocess.Popen | None = None
		self.restarts = 0

	@property
	def pid(self) -> int | None:
		return self.process.pid if self.process else None

	def spawn(self) -> None:
		log_dir = self.bench / "logs"
		log_dir.mkdir(exist_ok=True)
		argv = [sys.executable, "-m", "btu.scheduler_daemon", "run", "--bench", str(self.bench)]
		with open(log_dir / LOG_NAME, "ab") as log:
			self.process = subprocess.Popen(
				[*argv, "--for-worker", str(self.worker_pid)],
				stdin=subprocess.DEVNULL,
				stdout=log,
				stderr=subprocess.STDOUT,
				close_fds=True,
				preexec_fn=die_with_parent,
			)

	def ensure(self) -> bool:
		"""Start the candidate again if it ended; True if it did. Only in its worker (a worker-pool's workers, forked
		from the pool that started it, leave it to the pool)."""
		if os.getpid() != self.worker_pid or self.process is None or self.process.poll() is None:
			return False
		ended = self.process.returncode
		self.restarts += 1
		self.spawn()
		self.note("candidate_restarted", ended_with=ended, restarts=self.restarts, pid=self.pid)
		return True

	def note(self, event: str, **fields) -> None:
		"""One line in the candidates' log, as the scheduler writes its own."""
		record = logging.LogRecord("btu.scheduler", logging.WARNING, __file__, 0, event, None, None)
		setattr(record, log.FIELDS_ATTR, {"worker_pid": self.worker_pid, **fields})
		with open(self.bench / "logs" / LOG_NAME, "a") as out:
			out.write(log.TextFormatter().format(record) + "\n")

	def restart_at_maintenance(self) -> None:
		"""Have every rq worker of this process call `ensure` at its maintenance (Frappe's worker classes, the no-fork
		worker and rq's own are its subclasses)."""
		from rq.worker import Worker

		maintenance = Worker.run_maintenance_tasks
		candidate = self

		@functools.wraps(maintenance)
		def run_maintenance_tasks(worker, *args, **kwargs):
			candidate.ensure()
			return maintenance(worker, *args, **kwargs)

		Worker.run_maintenance_tasks = run_maintenance_tasks


def die_with_parent() -> None:
	"""In the child, before exec: SIGTERM when the worker dies (Linux; elsewhere ParentWatch alone tells)."""
	try:
		ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGTERM, 0, 0, 0)
	except (OSError, AttributeError):
		pass


class ParentWatch:
	"""Sets `stop` once this process's parent is no longer the worker `worker_pid` (it died: the child was given
	to another parent), looking every WATCH_SECS."""

	def __init__(self, worker_pid: int, stop: threading.Event, on_stop=lambda: None):
		self.worker_pid = worker_pid
		self.stop = stop
		self.on_stop = on_stop

	def alive(self) -> bool:
		return os.getppid() == self.worker_pid

	def run(self) -> None:
		while not self.stop.wait(WATCH_SECS):
			if not self.alive():
				self.stop.set()
				self.on_stop()
				return

	def start(self) -> threading.Thread:
		thread = threading.Thread(target=self.run, name="btu-worker-watch", daemon=True)
		thread.start()
		return thread
