"""RQ jobs for fires, built with the installed rq's own Job API.

Two executors (`btu.shared.job_contract`):

- ``frappe`` (default): the job is what Frappe v15's ``frappe.enqueue``
  writes: ``frappe.utils.background_jobs.execute_job`` with ``site``,
  ``user``, ``method`` (BTU's task runner), ``event``, ``job_name``,
  ``is_async`` and ``kwargs`` (the runner's); Frappe's TTLs and
  failed-registry callback; an id starting with the site so the site's RQ
  Job list shows it.
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
from dataclasses import MISSING, dataclass, field, fields
from datetime import datetime, timedelta, timezone

import redis
import rq
from rq import Callback
from rq.job import Job, JobStatus
from rq.utils import utcformat

from btu.shared.instants import slot_text
from btu.shared.job_contract import FRAPPE_EXECUTOR, TASK_RUNNER, runner_kwargs
from btu.shared.run_kind import RunKey

EXECUTE_JOB = "frappe.utils.background_jobs.execute_job"
TRUNCATE_FAILED_REGISTRY = "frappe.utils.background_jobs.truncate_failed_registry"
# frappe.utils.background_jobs: RQ_RESULTS_TTL and RQ_JOB_FAILURE_TTL.
RESULT_TTL = 10 * 60
FAILURE_TTL = 7 * 24 * 60 * 60
PER_FIRE_FIELDS = ("created_at", "enqueued_at", "status", "description", "data")


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
	# The Task's concurrency limit across its schedules (0: none): not part of the job, applied at release.
	max_concurrent: int = 0

	def to_dict(self) -> dict:
		# Not dataclasses.asdict, which copies every value deeply: a cold start writes twenty thousand of these.
		return {name: getattr(self, name) for name in TEMPLATE_FIELDS}

	def stored(self) -> dict:
		"""to_dict() less the fields at their defaults, as the scheduler's state keeps it (from_dict reads either)."""
		return {
			name: value
			for name, value in self.to_dict().items()
			if name not in TEMPLATE_DEFAULTS or value != TEMPLATE_DEFAULTS[name]
		}

	@classmethod
	def from_dict(cls, data: dict) -> JobTemplate:
		return cls(**data)


TEMPLATE_FIELDS = tuple(f.name for f in fields(JobTemplate))
TEMPLATE_DEFAULTS = {
	f.name: f.default if f.default is not MISSING else f.default_factory()
	for f in fields(JobTemplate)
	if f.default is not MISSING or f.default_factory is not MISSING
}


class IdForm:
	"""One way of writing (site, schedule, slot) as a job id: "<site><between><marker><sep><schedule><sep><slot>".

	The marker is "btu", or "btu@<namespace>" (escaped as the form escapes) for a bench with a namespace of its
	own (`Keys.namespace`): rq's job keys are one per Redis, so two benches sharing it, with a site
	and a schedule named alike, must not write one job id.

	The site never holds `between` and the slot never holds `sep` (site names
	holding "|" or ":" are refused; the last form escapes every separator), so
	the id splits at the first `between` and the last `sep` whatever the
	schedule holds; the escapes are injective, so different parts never give
	one id.
	"""

	def __init__(self, name: str, between: str, sep: str, escape, unescape):
		self.name = name
		self.between = between
		self.sep = sep
		self.escape = escape
		self.unescape = unescape

	def marker(self, namespace: str | None) -> str:
		return self.escape(f"btu@{namespace}") if namespace else "btu"

	def encode(self, site: str, schedule: str, slot: datetime, namespace: str | None = None) -> str:
		escape, sep, marker = self.escape, self.sep, self.marker(namespace)
		return f"{escape(site)}{self.between}{marker}{sep}{escape(schedule)}{sep}{escape(compact_slot(slot))}"

	def decode(self, identifier: str, namespace: str | None = None) -> tuple[str, str, datetime]:
		site, between, rest = identifier.partition(self.between)
		head = f"{self.marker(namespace)}{self.sep}"
		schedule, sep, slot = rest[len(head) :].rpartition(self.sep)
		if not (between and sep and rest.startswith(head)):
			raise ValueError(f"job id {identifier!r} is not a BTU job id of the form {self.name}")
		found = _COMPACT_SLOT.fullmatch(self.unescape(slot))
		if found is None:
			raise ValueError(f"job id {identifier!r} ends in {slot!r}, not a slot such as 20260329T013000Z")
		moment = datetime.strptime(found[1], "%Y%m%dT%H%M%S").replace(tzinfo=timezone.utc)
		parsed = (self.unescape(site), self.unescape(schedule), moment + timedelta(milliseconds=int(found[2] or 0)))
		# Only the id this module writes for those parts: an unescaped "%", a lower-case "_2e", a ".000" are refused.
		if self.encode(*parsed, namespace) != identifier:
			raise ValueError(f"job id {identifier!r} is not how BTU writes the id of {parsed!r}")
		return parsed


class _ByteEscapes(dict):
	"""str.translate table: ASCII letters and digits kept, any other character as "_XX" per UTF-8 byte."""

	def __missing__(self, code: int) -> str:
		char = chr(code)
		self[code] = char if char.isascii() and char.isalnum() else "".join(f"_{byte:02X}" for byte in char.encode())
		return self[code]


_BYTE_ESCAPES = _ByteEscapes()
_ESCAPED_BYTES = re.compile(r"(?:_[0-9A-F]{2})+")
_PERCENT_ESCAPES = {ord("%"): "%25", ord(":"): "%3A"}
_PERCENT_ESCAPED = re.compile(r"%(25|3A)")
_COMPACT_SLOT = re.compile(r"(\d{8}T\d{6})(?:\.(\d{3}))?Z")


def compact_slot(slot: datetime) -> str:
	"""The slot in a job id: "20260329T013000Z", or "20260329T013000.250Z" with milliseconds."""
	return slot_text(slot).replace("-", "").replace(":", "")


# Tried in this order; the first whose id the installed rq's Job.create accepts is used. Site
# names never hold "|" or ":" (bench.py refuses them), so the first two need not escape the site.
ID_FORMS = (
	# rq 1.x (Frappe v15): any text. Frappe's "<site>::<id>"; the slot never holds "|".
	IdForm("<site>::btu|<schedule>|<slot>", "::", "|", str, str),
	# rq 2.0 to 2.7 (Frappe v16, rq 2.6.1) refuse ":" only: Frappe's "<site>||<id>", and instead of
	# Frappe's ":" -> "|", which makes "TS:1" and "TS|1" one id, "%" and ":" percent-escaped.
	IdForm(
		"<site>||btu|<schedule>|<slot> (% and : escaped)",
		"||",
		"|",
		lambda text: text.translate(_PERCENT_ESCAPES),
		lambda text: _PERCENT_ESCAPED.sub(lambda m: "%" if m[1] == "25" else ":", text),
	),
	# rq 2.8+ takes only [A-Za-z0-9_-]: every other character as _XX per UTF-8 byte, "-" between parts.
	IdForm(
		"<site>--btu-<schedule>-<slot> (_XX escaped)",
		"--",
		"-",
		lambda text: text.translate(_BYTE_ESCAPES),
		lambda text: _ESCAPED_BYTES.sub(lambda m: bytes.fromhex(m[0].replace("_", "")).decode(), text),
	),
)
# Every character class a name may hold: ASCII punctuation and space, Latin, CJK, beyond the BMP.
_PROBE = ("a-b_c.d~é", " !\"#$%&'()*+,-./:;<=>?@[\\]^_`{|}~é中😀", datetime(2000, 1, 1, 0, 0, 0, 1000, timezone.utc))


def rq_accepts(identifier: str) -> bool:
	"""Whether the installed rq's Job.create takes `identifier` as a job id; nothing is sent to Redis."""
	try:
		Job.create("builtins.print", id=identifier, connection=redis.Redis())  # never connected
	except ValueError:
		return False
	return True


def _installed_form() -> IdForm:
	for form in ID_FORMS:
		if rq_accepts(form.encode(*_PROBE)):
			return form
	raise RuntimeError(
		f"rq {rq.__version__} accepts none of BTU's job id forms ({', '.join(f.name for f in ID_FORMS)})"
	)


ID_FORM = _installed_form()


def job_id(site: str, schedule: str, slot: datetime, namespace: str | None = None) -> str:
	"""Deterministic per (site, schedule, slot to the millisecond), in Frappe's form where the installed rq allows it;
	`namespace`: the bench's (`Keys.namespace`).

	Injective: no two (site, schedule, slot) share an id, so one site's fire is
	never taken for another's duplicate. `parse_job_id` is its inverse.
	"""
	return ID_FORM.encode(site, schedule, slot, namespace)


def parse_job_id(identifier: str, namespace: str | None = None) -> tuple[str, str, datetime]:
	"""(site, schedule, slot) of a BTU job id of the bench with `namespace`; ValueError for any text `job_id` does not
	write."""
	return ID_FORM.decode(identifier, namespace)


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
		job = self.rq_job(self.kwargs("", epoch, epoch))
		self.func_name = job.func_name
		self.args = job.args
		self.serializer = job.serializer
		self.fields = {k: v for k, v in job.to_dict().items() if k not in PER_FIRE_FIELDS}

	def rq_job(self, kwargs: dict, identifier: str = "btu-shape", description: str = "") -> Job:
		"""A whole rq Job of this shape with `kwargs`, made by rq's Job.create; nothing is saved."""
		template = self.template
		job = Job.create(
			EXECUTE_JOB if template.executor == FRAPPE_EXECUTOR else template.function,
			kwargs=kwargs,
			connection=self.connection,
			id=identifier,
			timeout=template.timeout,
			result_ttl=template.result_ttl,
			failure_ttl=template.failure_ttl,
			description=description,
			origin=template.queue,
			on_failure=Callback(TRUNCATE_FAILED_REGISTRY) if template.executor == FRAPPE_EXECUTOR else None,
		)
		job.origin = template.queue
		job._status = JobStatus.QUEUED
		return job

	def kwargs(self, schedule: str, slot: datetime, fire_at: datetime) -> dict:
		"""The job's kwargs for the run whose key's text is `schedule`. The runner reads the enqueue time from the rq
		job: it is stamped at release."""
		template = self.template
		if template.executor != FRAPPE_EXECUTOR:
			return template.kwargs
		return {
			"site": self.site,
			"user": "Administrator",
			"method": TASK_RUNNER,
			"event": None,
			"job_name": TASK_RUNNER,
			"is_async": True,
			"kwargs": runner_kwargs(template.task, RunKey.parse(schedule), slot, fire_at),
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


def queue_key(queue: str) -> str:
	return f"{rq.Queue.redis_queue_namespace_prefix}{queue}"


QUEUES_KEY = rq.Queue.redis_queues_keys
JOB_KEY_PREFIX = Job.redis_job_namespace_prefix
