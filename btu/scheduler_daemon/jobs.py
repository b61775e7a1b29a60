"""RQ jobs for fires, built with the installed rq's own Job API.

Two executors:

- ``frappe`` (default): the job is what Frappe v15's ``frappe.enqueue``
  writes: ``frappe.utils.background_jobs.execute_job`` with ``site``,
  ``user``, ``method`` (BTU's task runner), ``event``, ``job_name``,
  ``is_async`` and ``kwargs``; Frappe's TTLs and failed-registry callback;
  an id starting with the site so the site's RQ Job list shows it.
- ``rq``: the job calls the Task's function with its keyword arguments, so a
  plain ``rq worker`` runs it (the demo, and RQ users without Frappe).

The scheduler does not save the job itself: it hands the job's hash
(``Job.to_dict``) to the fire script, which writes it, pushes the id and
moves the schedule on in one atomic step.
"""

from __future__ import annotations

import re
from dataclasses import asdict, dataclass, field
from datetime import datetime, timezone

import rq
from rq import Callback
from rq.job import Job, JobStatus

EXECUTORS = ("frappe", "rq")
EXECUTE_JOB = "frappe.utils.background_jobs.execute_job"
TASK_RUNNER = "btu.btu_core.task_runner.run_scheduled_task"
TRUNCATE_FAILED_REGISTRY = "frappe.utils.background_jobs.truncate_failed_registry"
# frappe.utils.background_jobs: RQ_RESULTS_TTL and RQ_JOB_FAILURE_TTL.
RESULT_TTL = 10 * 60
FAILURE_TTL = 7 * 24 * 60 * 60
RQ_MAJOR = int(rq.__version__.split(".")[0])
_NOT_RQ2_SAFE = re.compile(r"[^A-Za-z0-9_-]")


@dataclass(frozen=True)
class JobTemplate:
	"""What every fire of one schedule has in common (kept in the schedule's state)."""

	executor: str
	queue: str  # the full RQ queue name, "<bench_id>:<queue type>"
	timeout: int
	task: str
	description: str
	function: str = ""  # rq executor: the Task's function path
	kwargs: dict = field(default_factory=dict)  # rq executor: the merged arguments
	result_ttl: int = RESULT_TTL
	failure_ttl: int = FAILURE_TTL

	def to_dict(self) -> dict:
		return asdict(self)

	@classmethod
	def from_dict(cls, data: dict) -> "JobTemplate":
		return cls(**data)


def slot_text(slot: datetime) -> str:
	"""A slot as UTC ISO 8601 with Z (milliseconds only when not zero)."""
	slot = slot.astimezone(timezone.utc)
	text = slot.strftime("%Y-%m-%dT%H:%M:%S")
	if slot.microsecond:
		text += f".{slot.microsecond // 1000:03d}"
	return text + "Z"


def job_id(site: str, schedule: str, slot: datetime) -> str:
	"""Deterministic per (site, schedule, slot), in the form Frappe gives job ids.

	rq 1.x (Frappe v15): "<site>::<key>". rq 2.x (Frappe v16) refuses ":":
	"<site>||<key>" with ":" made "|", as Frappe v16's create_job_id does, and
	where the installed rq allows fewer characters still, those become "-".
	"""
	compact = slot_text(slot).replace("-", "").replace(":", "")
	key = f"btu|{schedule}|{compact}"
	if RQ_MAJOR < 2:
		return f"{site}::{key}"
	candidate = f"{site}||{key.replace(':', '|')}"
	return candidate if _rq_accepts(candidate) else _NOT_RQ2_SAFE.sub("-", candidate)


def _rq_accepts(identifier: str) -> bool:
	try:
		from rq.job import validate_job_id
	except ImportError:  # rq 2.0 to 2.6 only refuse ":"
		return ":" not in identifier
	try:
		validate_job_id(identifier)
	except ValueError:
		return False
	return True


def build_job(
	connection, template: JobTemplate, site: str, schedule: str, slot: datetime, fire_at: datetime, enqueued_at: datetime
) -> tuple[str, dict]:
	"""The job's id and its hash, exactly as rq's own enqueue would save it."""
	lag_ms = round((enqueued_at - fire_at).total_seconds() * 1000, 3)
	if template.executor == "frappe":
		func = EXECUTE_JOB
		kwargs = {
			"site": site,
			"user": "Administrator",
			"method": TASK_RUNNER,
			"event": None,
			"job_name": TASK_RUNNER,
			"is_async": True,
			"kwargs": {
				"task": template.task,
				"schedule": schedule,
				"slot": slot_text(slot),
				"enqueued_at": slot_text(enqueued_at),
				"fire_lag_ms": lag_ms,
			},
		}
		on_failure = Callback(TRUNCATE_FAILED_REGISTRY)
	else:
		func = template.function
		kwargs = dict(template.kwargs)
		on_failure = None
	identifier = job_id(site, schedule, slot)
	job = Job.create(
		func,
		kwargs=kwargs,
		connection=connection,
		id=identifier,
		timeout=template.timeout,
		result_ttl=template.result_ttl,
		failure_ttl=template.failure_ttl,
		description=f"{template.description} [{site} {schedule} {slot_text(slot)}]",
		origin=template.queue,
		on_failure=on_failure,
	)
	job.origin = template.queue
	job.enqueued_at = enqueued_at.astimezone(timezone.utc).replace(tzinfo=None) if RQ_MAJOR < 2 else enqueued_at
	job._status = JobStatus.QUEUED
	return identifier, job.to_dict()


def queue_key(queue: str) -> str:
	return f"{rq.Queue.redis_queue_namespace_prefix}{queue}"


QUEUES_KEY = rq.Queue.redis_queues_keys
