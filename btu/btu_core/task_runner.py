"""The job contract's entry points: what the jobs BTU queues name, by dotted path, kept at this path across upgrades.

The scheduler writes `run_scheduled_task` into every RQ job it fires (`btu.shared.job_contract.TASK_RUNNER`), and a
job may sit queued across an upgrade; "Run via Worker" queues `run_enqueued_task` (frappe.enqueue). Moving either
would fail the jobs queued before. Here a job is dispatched by its run's kind (`job_contract.run_of`); the runs
themselves are in `btu.btu_core.runs`: a Task's (`task_run`), an enqueued function's (`enqueue`), a Frappe Scheduled
Job Type's (`frappe_jobs`).
"""

from __future__ import annotations

import functools
from datetime import timezone

import frappe
from rq import get_current_job

from btu.btu_core.runs import enqueue, retries, run_requests
from btu.btu_core.runs.task_run import TaskRun
from btu.shared.instants import parse_utc_iso, slot_text
from btu.shared.job_contract import run_of
from btu.shared.run_kind import RunKind
from btu.shared.run_requests import CANCELLED, DONE, ENQUEUE


def failing_without_values(entry):
	"""`entry`, raising RunFailed (the Log's name and the exception's kind, from no frame holding a run's values) where
	its run failed and recorded the failure. Frappe's execute_job writes what a job raised into an Error Log with each
	frame's local variables, and the frames below this one hold the run's arguments and the exception's text."""

	@functools.wraps(entry)
	def job(*args, **kwargs):
		failure = None
		try:
			return entry(*args, **kwargs)
		except Exception as exc:
			log = getattr(exc, retries.RECORDED_IN, None)
			if log is None:
				raise
			failure = retries.RunFailed(f"{log}: {type(exc).__name__} (see the Log)")
		raise failure from None

	return job


@failing_without_values
def run_scheduled_task(task, schedule, slot, fire_at=None, enqueued_at=None, fire_lag_ms=None, kind=None):
	"""The method of the scheduler's RQ jobs: run `task` for the `slot` (UTC ISO) of the run whose key's text is
	`schedule`, of `kind` (`job_contract.run_of`): a schedule's Task run here, a run request's (`run_request`), a
	Frappe Scheduled Job Type's (`frappe_jobs.run`).

	The scheduler queues a prepared job at its `fire_at` (the slot plus any
	jitter) and stamps the rq job's `enqueued_at` then; the lag is read from
	the job. `enqueued_at` and `fire_lag_ms` are what earlier BTU schedulers
	put in the kwargs instead; jobs they queued still run.
	"""
	slot = parse_utc_iso(slot, "slot")
	run = run_of(schedule or "", kind)  # no schedule: a Task run for no schedule's slot, as TaskRun takes it
	if enqueued_at:
		enqueued_at = parse_utc_iso(enqueued_at, "enqueued_at")
	else:
		job = get_current_job()
		enqueued_at = job.enqueued_at.replace(tzinfo=timezone.utc) if job and job.enqueued_at else None
	moment = parse_utc_iso(fire_at, "fire_at") if fire_at else slot
	if fire_lag_ms is not None:
		fire_lag_ms = float(fire_lag_ms)
	elif enqueued_at:
		fire_lag_ms = round((enqueued_at - moment).total_seconds() * 1000, 3)
	if run.kind is RunKind.RUN_REQUEST:
		return run_request(run.name, enqueued_at, fire_lag_ms, moment)
	if run.kind is RunKind.FRAPPE_JOB:
		# Imported for this kind of run only: it loads the schedule rules (to name a slot as Frappe's side does), and
		# its run Frappe's Scheduled Job Type controller and Document.
		from btu.btu_core.runs import frappe_jobs

		return frappe_jobs.run(run.name, slot_text(slot))
	task_run = TaskRun(
		task, schedule=run.name, slot=slot, enqueued_at=enqueued_at, fire_lag_ms=fire_lag_ms, moment=moment
	)
	return task_run.execute().name


def run_request(name: str, enqueued_at, fire_lag_ms, moment=None):
	"""A run request's fire: a retry's, a backfilled slot's or a chained run's Task run, or an enqueued function's
	call."""
	request = run_requests.load(name)
	if request is not None and request.origin == ENQUEUE:
		return enqueue.run(request, enqueued_at, fire_lag_ms)
	if request is None or request.status in (CANCELLED, DONE):
		why = "deleted" if request is None else f"{request.status.lower()} (log={request.log or '-'})"
		frappe.logger("btu").info(f"site={frappe.local.site} request={name} {why}; not run")
		return request.log if request is not None else None
	slot = parse_utc_iso(request.slot_utc, "slot_utc") if request.slot_utc else None
	run = TaskRun(
		request.task,
		schedule=request.schedule if slot else None,
		slot=slot,
		enqueued_at=enqueued_at,
		fire_lag_ms=fire_lag_ms,
		request=request,
		moment=moment or parse_utc_iso(request.run_at_utc, "run_at_utc"),
	)
	return run.execute().name


@failing_without_values
def run_enqueued_task(task, schedule=None, enqueued_at=None):
	"""The method of "Run via Worker" jobs (frappe.enqueue)."""
	run = TaskRun(
		task, schedule=schedule, enqueued_at=parse_utc_iso(enqueued_at, "enqueued_at") if enqueued_at else None
	)
	return run.execute().name
