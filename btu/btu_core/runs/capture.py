"""One call of a run's function, as a Task Log records it: stdout, stderr, logging, its value or its exception.

Both kinds of run that write a Log use it: a Task's (`btu.btu_core.task_runner`) and a function
enqueued with `btu.enqueue_at(..., task_log=True)` (`btu.btu_core.runs.enqueue`).
"""

from __future__ import annotations

import io
import json
import logging
import os
import signal
import socket
import threading
import time
import traceback
from collections.abc import Callable
from contextlib import contextmanager, nullcontext, redirect_stderr, redirect_stdout
from dataclasses import dataclass, field

import frappe
from rq.timeouts import JobTimeoutException

OUTPUT_CAP_CHARS = 1_000_000
RESULT_CAP_CHARS = 64_000
LOG_FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"


class CappedText(io.TextIOBase):
	"""A text sink that keeps the first `cap` characters and counts the rest."""

	def __init__(self, cap: int = OUTPUT_CAP_CHARS):
		super().__init__()
		self.cap = cap
		self.parts: list[str] = []
		self.kept = 0
		self.dropped = 0
		self.lock = threading.Lock()

	def writable(self) -> bool:
		return True

	def write(self, text) -> int:
		text = str(text)
		with self.lock:
			room = self.cap - self.kept
			if room > 0:
				self.parts.append(text[:room])
				self.kept += min(room, len(text))
			self.dropped += max(0, len(text) - max(room, 0))
		return len(text)

	def getvalue(self) -> str:
		text = "".join(self.parts)
		if self.dropped:
			text += "\n" + frappe._("[BTU: output cut at {0} characters; {1} more were dropped]").format(
				self.cap, self.dropped
			)
		return text


class CaptureHandler(logging.Handler):
	def __init__(self, sink: CappedText):
		super().__init__(logging.DEBUG)
		self.sink = sink
		self.setFormatter(logging.Formatter(LOG_FORMAT))

	def emit(self, record: logging.LogRecord) -> None:
		try:
			self.sink.write(self.format(record) + "\n")
		except Exception:
			self.handleError(record)


@contextmanager
def captured(stdout: CappedText, stderr: CappedText, log_output: CappedText):
	"""Send stdout, stderr and root-logger records (INFO and up) to the sinks."""
	root = logging.getLogger()
	handler = CaptureHandler(log_output)
	previous_level = root.level
	root.addHandler(handler)
	if root.level == logging.NOTSET or root.level > logging.INFO:
		root.setLevel(logging.INFO)
	try:
		with redirect_stdout(stdout), redirect_stderr(stderr):
			yield
	finally:
		root.removeHandler(handler)
		root.setLevel(previous_level)


@contextmanager
def time_limit(seconds: int):
	"""Raise rq's JobTimeoutException after `seconds`, as RQ's own death penalty does.

	Used only outside RQ jobs (RQ enforces the job timeout itself) and only in
	the main thread, where SIGALRM can be delivered.
	"""
	if seconds <= 0 or threading.current_thread() is not threading.main_thread():
		yield
		return

	def expire(signum, frame):
		raise JobTimeoutException(f"Task exceeded maximum timeout value ({seconds} seconds)")

	previous = signal.signal(signal.SIGALRM, expire)
	signal.alarm(seconds)
	try:
		yield
	finally:
		signal.alarm(0)
		signal.signal(signal.SIGALRM, previous)


def render_result(value) -> str:
	if value is None:
		return ""
	try:
		text = json.dumps(value, indent=1, ensure_ascii=False)
	except (TypeError, ValueError):
		text = repr(value)
	if len(text) > RESULT_CAP_CHARS:
		text = (
			text[:RESULT_CAP_CHARS]
			+ "\n"
			+ frappe._("[BTU: return value cut at {0} characters]").format(RESULT_CAP_CHARS)
		)
	return text


@dataclass
class Call:
	"""What one call did: its captured output, then its value or the exception it raised."""

	stdout: CappedText = field(default_factory=CappedText)
	stderr: CappedText = field(default_factory=CappedText)
	log_output: CappedText = field(default_factory=CappedText)
	elapsed: float = 0.0
	result: object = None
	exc: BaseException | None = None
	trace: str = ""

	@property
	def status(self) -> str:
		"""The Task Log status it ends in."""
		if self.exc is None:
			return "Succeeded"
		return "Timed Out" if isinstance(self.exc, JobTimeoutException) else "Failed"

	@property
	def result_message(self) -> str:
		return render_result(self.result) if self.exc is None else f"{type(self.exc).__name__}: {self.exc}"

	def log_values(self) -> dict:
		"""The finished Log's fields this call decides (logging_output is the caller's, with its notes added)."""
		return {
			"status": self.status,
			"execution_time": round(self.elapsed, 6),
			"result_message": self.result_message,
			"stdout": self.stdout.getvalue(),
			"stderr": self.stderr.getvalue(),
			"traceback": self.trace,
		}


def call_captured(call: Callable[[], object], limit_secs: int = 0, *, capture: bool = True) -> Call:
	"""Run `call()` with its output captured (unless not `capture`: it goes where this process's goes) and, outside
	RQ, `limit_secs` as its time limit. On an exception its own database writes are rolled back (they must not
	survive its failure) and the exception is kept, not raised."""
	outcome = Call()
	started = time.perf_counter()
	try:
		with (
			captured(outcome.stdout, outcome.stderr, outcome.log_output) if capture else nullcontext(),
			time_limit(limit_secs),
		):
			outcome.result = call()
	except Exception as exc:
		outcome.elapsed = time.perf_counter() - started
		outcome.exc = exc
		outcome.trace = traceback.format_exc()
		frappe.db.rollback()
		return outcome
	outcome.elapsed = time.perf_counter() - started
	return outcome


def where_it_runs(job) -> dict:
	"""A Log's worker, RQ job id and site: the RQ worker running `job`, else this web or console process."""
	if job is not None:
		worker = getattr(job, "worker_name", None) or f"rq@{socket.gethostname()}:{os.getpid()}"
		job_id = job.id
	else:
		where = "web" if getattr(frappe.local, "request", None) else "process"
		worker = f"{where}@{socket.gethostname()}:{os.getpid()}"
		job_id = None
	return {"worker": worker, "rq_job_id": job_id, "site": frappe.local.site}
