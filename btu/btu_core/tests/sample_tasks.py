"""Functions the tier-2 tests run as BTU Tasks, declared by @runnable (undeclared_task is not)."""

from __future__ import annotations

import json
import logging
import os
import sys
import time
from datetime import timezone

import frappe

from btu import runnable
from btu.shared.run_kind import RunKind


@runnable
def say_hello(name: str = "world", punctuation: str = "!", linger_secs: float = 0) -> dict:
	"""Greets on stdout, stderr and the log; `linger_secs` makes the run that much slower, as a slow worker's."""
	print(f"hello {name}{punctuation}")
	print(f"warning for {name}", file=sys.stderr)
	logging.getLogger("btu.sample").info("greeted %s", name)
	time.sleep(linger_secs)
	return {"greeted": name}


@runnable
def needs_company(company: str, dry_run: bool = False) -> dict:
	return {"company": company, "dry_run": dry_run}


@runnable
def insert_then_fail(marker: str) -> None:
	frappe.get_doc({"doctype": "ToDo", "description": marker}).insert(ignore_permissions=True)
	print(f"inserted {marker}")
	raise RuntimeError(f"failing after inserting {marker}")


@runnable
def maybe_fail(fail: bool = True) -> str:
	if fail:
		raise RuntimeError("failing as asked")
	return "ok"


@runnable
def sleep_for(seconds: float) -> None:
	print("going to sleep")
	time.sleep(seconds)
	print("woke up")


@runnable
def shout(size: int) -> None:
	sys.stdout.write("x" * size)


@runnable
def flaky(marker: str, failures: int) -> int:
	"""Fails its first `failures` runs (counted in Redis under `marker`), then succeeds: a retry's way back."""
	count = frappe.cache().incr(f"btu-test-flaky:{marker}")
	if count <= failures:
		raise RuntimeError(f"flaky run {count} of {failures} failing")
	return count


@runnable
def signal_retry() -> None:
	raise frappe.RetryBackgroundJobError("try again later")


def undeclared_task() -> str:
	print("undeclared_task ran")
	return "ran"


NOT_A_FUNCTION = 42


@runnable
def note_call(marker: str, value: str = "") -> None:
	"""Records each call in Redis under `marker` (time and value): what an enqueued run left behind."""
	frappe.cache().rpush(f"btu-test-calls:{marker}", f"{time.time():.6f} {value}")


@runnable
def note_user(marker: str) -> None:
	"""Records the user the call runs as, and whether it may read System Settings (a System Manager's doctype)."""
	frappe.cache().rpush(
		f"btu-test-calls:{marker}", f"{frappe.session.user} {int(frappe.has_permission('System Settings', 'read'))}"
	)


# Not @runnable: a Scheduled Job Type's method is declared by its app's scheduler_events, and BTU runs it through
# the Scheduled Job Type's own execute(), never as a Task.
FRAPPE_JOB_CALLS = "btu-test-frappe-job-calls"


def note_frappe_job() -> None:
	"""A Scheduled Job Type's method in the tests: records the time of each run in Redis."""
	frappe.cache().rpush(FRAPPE_JOB_CALLS, f"{time.time():.6f}")


# benchmarks/frappe_jobs.py: Scheduled Job Types whose runs say when their RQ job was enqueued. Frappe names a job
# type after its method's last two parts, so each frequency has a method of its own.
FRAPPE_JOB_PROBES = "btu-benchmark-frappe-job-probes"


def probe_frappe_job(method: str) -> None:
	"""Records one run in Redis as JSON: the method, its RQ job's id and `enqueued_at` (UTC epoch) and when it ran."""
	import json
	from datetime import timezone

	from rq import get_current_job

	job = get_current_job()
	enqueued = job.enqueued_at if job else None
	if enqueued is not None and enqueued.tzinfo is None:
		enqueued = enqueued.replace(tzinfo=timezone.utc)  # rq stamps UTC
	frappe.cache().rpush(
		FRAPPE_JOB_PROBES,
		json.dumps(
			{
				"method": method,
				"job_id": job.id if job else None,
				"enqueued_at": enqueued.timestamp() if enqueued else None,
				"ran_at": time.time(),
			}
		),
	)


def probe_every_minute() -> None:
	probe_frappe_job("btu.btu_core.tests.sample_tasks.probe_every_minute")


def probe_all() -> None:
	probe_frappe_job("btu.btu_core.tests.sample_tasks.probe_all")


# benchmarks/run_overhead.py: each run of `probe_start` adds one JSON record to RUN_PROBES + ":" + its marker.
RUN_PROBES = "btu-benchmark-run-probes"


@runnable
def probe_start(marker: str, fail_first_attempt: bool = False) -> None:
	"""Records when its first line ran (epoch and monotonic), the process's CPU until then (a forked work-horse's
	counts from its fork) and its RQ job (id, enqueued_at, started_at, the runner's kwargs). With
	`fail_first_attempt`, a run that is not a run request's fails, so the Task's retry follows."""
	first_line, monotonic, cpu = time.time(), time.perf_counter(), time.process_time()
	from rq import get_current_job

	job = get_current_job()
	runner = ((job.kwargs or {}).get("kwargs") or {}) if job else {}

	def epoch(moment):
		return moment.replace(tzinfo=timezone.utc).timestamp() if moment else None  # rq stamps naive UTC

	frappe.cache().rpush(
		f"{RUN_PROBES}:{marker}",
		json.dumps(
			{
				"first_line": first_line,
				"monotonic": monotonic,
				"cpu": cpu,
				"pid": os.getpid(),
				"modules": len(sys.modules),
				"job_id": job.id if job else None,
				"enqueued_at": epoch(job.enqueued_at) if job else None,
				"started_at": epoch(job.started_at) if job else None,
				"schedule": runner.get("schedule"),
				"kind": runner.get("kind"),
				"slot": runner.get("slot"),
				"fire_at": runner.get("fire_at"),
			}
		),
	)
	if fail_first_attempt and runner.get("kind") != RunKind.RUN_REQUEST.value:
		raise RuntimeError("a first attempt fails, as benchmarks/run_overhead.py asks, so that its retry runs")


def probe_scheduled_job() -> None:
	"""A Scheduled Job Type's method (no arguments) in benchmarks/run_overhead.py."""
	probe_start("frappe-job")


# test_run_path: the modules loaded when a run's function is called, kept by `note_modules` in this process.
MODULES_AT_CALL: list[set[str]] = []
LOGS_SAVED: list[tuple[str, str]] = []


def note_log_saved(doc, method=None) -> None:
	"""A doc_events hook on BTU Task Log in the tests: notes each save's Log and status."""
	LOGS_SAVED.append((doc.name, doc.status))


@runnable
def note_modules() -> None:
	MODULES_AT_CALL.append(set(sys.modules))
