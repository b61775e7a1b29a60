"""RQ jobs for fires, built with the installed rq's own Job API.

Two executors:

- ``frappe`` (default): the job is what Frappe v15's ``frappe.enqueue``
  writes: ``frappe.utils.background_jobs.execute_job`` with ``site``,
  ``user``, ``method`` (BTU's task runner), ``event``, ``job_name``,
  ``is_async`` and ``kwargs``; Frappe's TTLs and failed-registry callback;
  an id starting with the site so the site's RQ Job list shows it.
- ``rq``: the job calls the Task's function with its keyword arguments, so a
  plain ``rq worker`` runs it (the demo, and RQ users without Frappe).

The scheduler does not save the job itself: it hands the job's fields to
the prepare script, which writes the hash (status ``scheduled``) and moves
the schedule on in one atomic step ahead of the fire's moment; at the moment
the release script stamps ``enqueued_at``, sets ``queued`` and pushes the id.
"""

from __future__ import annotations

import re
import zlib
from dataclasses import asdict, dataclass, field
from datetime import datetime, timezone
from functools import lru_cache

import rq
from rq import Callback
from rq.job import Job, JobStatus
from rq.utils import utcformat

EXECUTORS = ("frappe", "rq")
EXECUTE_JOB = "frappe.utils.background_jobs.execute_job"
TASK_RUNNER = "btu.btu_core.task_runner.run_scheduled_task"
TRUNCATE_FAILED_REGISTRY = "frappe.utils.background_jobs.truncate_failed_registry"
# frappe.utils.background_jobs: RQ_RESULTS_TTL and RQ_JOB_FAILURE_TTL.
RESULT_TTL = 10 * 60
FAILURE_TTL = 7 * 24 * 60 * 60
PER_FIRE_FIELDS = ("created_at", "enqueued_at", "status", "description", "data")
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


@lru_cache(maxsize=4096)
def slot_text(slot: datetime) -> str:
	"""A slot as UTC ISO 8601 with Z (milliseconds only when not zero); cached, as schedules share slots."""
	slot = slot.astimezone(timezone.utc)
	text = f"{slot.year:04d}-{slot.month:02d}-{slot.day:02d}T{slot.hour:02d}:{slot.minute:02d}:{slot.second:02d}"
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


def rq_time(moment: datetime) -> str:
	"""A time as rq writes `created_at` and `enqueued_at`."""
	return utcformat(moment.astimezone(timezone.utc))


class JobShape:
	"""Every job of one template on one site, as the installed rq's ``Job.create(...).to_dict()`` writes it.

	Built once through rq's own API; a fire then makes only the fields that
	differ from job to job (``PER_FIRE_FIELDS``): a pickle and a compress
	instead of a whole rq Job, and the prepare script is sent the shared fields
	once per batch rather than once per job.
	"""

	def __init__(self, connection, template: JobTemplate, site: str):
		self.connection = connection  # rq's Job wants one; nothing is sent through it
		self.template = template
		self.site = site
		self.queue_key = queue_key(template.queue)
		epoch = datetime.fromtimestamp(0, timezone.utc)
		job = self._create(self.kwargs("", epoch, epoch))
		self.func_name = job.func_name
		self.args = job.args
		self.serializer = job.serializer
		self.fields = {k: v for k, v in job.to_dict().items() if k not in PER_FIRE_FIELDS}

	def _create(self, kwargs: dict, identifier: str = "btu-shape", description: str = "") -> Job:
		template = self.template
		job = Job.create(
			EXECUTE_JOB if template.executor == "frappe" else template.function,
			kwargs=kwargs,
			connection=self.connection,
			id=identifier,
			timeout=template.timeout,
			result_ttl=template.result_ttl,
			failure_ttl=template.failure_ttl,
			description=description,
			origin=template.queue,
			on_failure=Callback(TRUNCATE_FAILED_REGISTRY) if template.executor == "frappe" else None,
		)
		job.origin = template.queue
		job._status = JobStatus.QUEUED
		return job

	def kwargs(self, schedule: str, slot: datetime, fire_at: datetime) -> dict:
		"""The job's kwargs. The runner reads the enqueue time from the rq job: it is stamped at release."""
		template = self.template
		if template.executor != "frappe":
			return template.kwargs
		return {
			"site": self.site,
			"user": "Administrator",
			"method": TASK_RUNNER,
			"event": None,
			"job_name": TASK_RUNNER,
			"is_async": True,
			"kwargs": {
				"task": template.task,
				"schedule": schedule,
				"slot": slot_text(slot),
				"fire_at": slot_text(fire_at),
			},
		}

	def description(self, schedule: str, slot: datetime) -> str:
		return f"{self.template.description} [{self.site} {schedule} {slot_text(slot)}]"

	def data(self, kwargs: dict) -> bytes:
		"""rq's `data` field: the serialized (function, instance, args, kwargs) in a zlib stream.

		Stored rather than deflated (level 0, smallest window): rq's
		``zlib.decompress`` reads it all the same, and deflating a few hundred
		bytes costs 15-80 us, most of a fire's budget, to save about 90 bytes.
		"""
		packer = zlib.compressobj(0, zlib.DEFLATED, 9, 1)
		return packer.compress(self.serializer.dumps((self.func_name, None, self.args, kwargs))) + packer.flush()

	def fire_fields(self, schedule: str, slot: datetime, fire_at: datetime) -> tuple[str, bytes]:
		"""The `description` and `data` of one fire; the prepare script adds them to `fields` with the stamps."""
		return self.description(schedule, slot), self.data(self.kwargs(schedule, slot, fire_at))

	def mapping(self, schedule: str, slot: datetime, fire_at: datetime, created_at: datetime, enqueued_at: datetime) -> dict:
		"""The job's whole hash once released, as the prepare and release scripts write it."""
		description, data = self.fire_fields(schedule, slot, fire_at)
		return {
			**self.fields, "created_at": rq_time(created_at), "enqueued_at": rq_time(enqueued_at), "status": JobStatus.QUEUED.value,
			"description": description, "data": data,
		}

	def reference(self, schedule: str, slot: datetime, fire_at: datetime, created_at: datetime, enqueued_at: datetime) -> dict:
		"""The same hash made the slow way, through a whole rq Job (what tests compare `mapping` with)."""
		job = self._create(self.kwargs(schedule, slot, fire_at), job_id(self.site, schedule, slot), self.description(schedule, slot))
		job.created_at = created_at.astimezone(timezone.utc)
		job.enqueued_at = enqueued_at.astimezone(timezone.utc)
		return job.to_dict()


def queue_key(queue: str) -> str:
	return f"{rq.Queue.redis_queue_namespace_prefix}{queue}"


QUEUES_KEY = rq.Queue.redis_queues_keys
JOB_KEY_PREFIX = Job.redis_job_namespace_prefix
