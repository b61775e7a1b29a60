"""The job the scheduler writes and the Frappe app runs: which executor, which function, which keyword arguments.

The scheduler (btu.scheduler_daemon.store.jobs) builds every job of the frappe executor to call
TASK_RUNNER with `runner_kwargs`; btu.btu_core.task_runner.run_scheduled_task takes exactly
RUNNER_KWARGS (tests/engine/test_job_contract.py reads its signature).
"""

from __future__ import annotations

from datetime import datetime

from btu.shared.instants import slot_text
from btu.shared.run_kind import RunKey, RunKind

# frappe: the job is Frappe's execute_job wrapping TASK_RUNNER, which logs the run in a BTU Task Log.
# rq: the job calls the Task's function itself, so a plain `rq worker` runs it (no Frappe, no Log).
FRAPPE_EXECUTOR = "frappe"
RQ_EXECUTOR = "rq"
EXECUTORS = (FRAPPE_EXECUTOR, RQ_EXECUTOR)

TASK_RUNNER = "btu.btu_core.task_runner.run_scheduled_task"
# The runner's parameters, in order. The scheduler sends the first four, and `kind` for a run that is not a
# schedule's (`runner_kwargs`); the runner reads the enqueue time from the rq job, and takes enqueued_at and
# fire_lag_ms only from jobs that earlier BTU schedulers queued.
RUNNER_KWARGS = ("task", "schedule", "slot", "fire_at", "enqueued_at", "fire_lag_ms", "kind")


def runner_kwargs(task: str, run: RunKey, slot: datetime, fire_at: datetime) -> dict:
	"""The keyword arguments of one fire's TASK_RUNNER call: the run's key as its kind and its text (as in the job's
	id), instants as UTC ISO 8601 text (`slot_text`). A schedule's job leaves its kind out, as it was before kinds."""
	kwargs = {"task": task, "schedule": run.format(), "slot": slot_text(slot), "fire_at": slot_text(fire_at)}
	if run.kind is not RunKind.SCHEDULE:
		kwargs["kind"] = run.kind.value
	return kwargs


def run_of(schedule: str, kind: str | None) -> RunKey:
	"""The run a job's kwargs name. Without `kind` it is a schedule's job, or one an earlier BTU queued, whose key's
	text alone named the kind: read as the state it came from is."""
	return RunKey.parse(schedule) if kind is None else RunKey.of(RunKind(kind), schedule)
