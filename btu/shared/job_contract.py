"""The job the scheduler writes and the Frappe app runs: which executor, which function, which keyword arguments.

The scheduler (btu.scheduler_daemon.jobs) builds every job of the frappe executor to call
TASK_RUNNER with `runner_kwargs`; btu.btu_core.task_runner.run_scheduled_task takes exactly
RUNNER_KWARGS (tests/engine/test_job_contract.py reads its signature).
"""

from __future__ import annotations

from datetime import datetime

from btu.shared.instants import slot_text

# frappe: the job is Frappe's execute_job wrapping TASK_RUNNER, which logs the run in a BTU Task Log.
# rq: the job calls the Task's function itself, so a plain `rq worker` runs it (no Frappe, no Log).
FRAPPE_EXECUTOR = "frappe"
RQ_EXECUTOR = "rq"
EXECUTORS = (FRAPPE_EXECUTOR, RQ_EXECUTOR)

TASK_RUNNER = "btu.btu_core.task_runner.run_scheduled_task"
# The runner's parameters, in order. The scheduler sends the first four (`runner_kwargs`); the runner
# reads the enqueue time from the rq job, and takes enqueued_at and fire_lag_ms only from jobs that
# earlier BTU schedulers queued.
RUNNER_KWARGS = ("task", "schedule", "slot", "fire_at", "enqueued_at", "fire_lag_ms")


def runner_kwargs(task: str, schedule: str, slot: datetime, fire_at: datetime) -> dict:
	"""The keyword arguments of one fire's TASK_RUNNER call: instants as UTC ISO 8601 text (`slot_text`)."""
	return {"task": task, "schedule": schedule, "slot": slot_text(slot), "fire_at": slot_text(fire_at)}
