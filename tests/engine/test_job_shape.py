"""A fire's job hash, made from its JobShape, is what rq's own Job.create(...).to_dict() makes."""

from __future__ import annotations

import json
import zlib
from datetime import datetime, timedelta, timezone

import pytest
from rq.job import Job

from btu.scheduler_daemon.store.jobs import PER_FIRE_FIELDS, JobShape, JobTemplate, job_id
from tests.engine.helpers import released_job_hash, rq_job_hash

pytestmark = pytest.mark.versions

SLOT = datetime(2026, 3, 29, 1, 30, tzinfo=timezone.utc)
TEMPLATES = {
	"frappe": JobTemplate(
		executor="frappe", queue="bench-x:long", timeout=123, task="TASK-0001", description="Nightly invoices"
	),
	"rq": JobTemplate(
		executor="rq",
		queue="bench-x:default",
		timeout=0,
		task="TASK-0002",
		description="hello",
		function="tests.engine.tasks.record",
		kwargs={"name": "Zoë", "n": [1, 2]},
	),
}


@pytest.mark.parametrize("executor", TEMPLATES)
@pytest.mark.parametrize("jitter_ms", [0, 1500])
def test_mapping_equals_rq_to_dict(r, executor, jitter_ms):
	shape = JobShape(r, TEMPLATES[executor], "site1.localhost")
	fire_at = SLOT + timedelta(milliseconds=jitter_ms)
	created_at = fire_at - timedelta(seconds=1, microseconds=70)
	enqueued_at = fire_at + timedelta(milliseconds=3, microseconds=250)
	made = released_job_hash(shape, "TS-000042", SLOT, fire_at, created_at, enqueued_at)
	reference = rq_job_hash(shape, "TS-000042", SLOT, fire_at, created_at, enqueued_at)
	# `data` is stored rather than deflated: equal once decompressed, as rq reads it.
	assert zlib.decompress(made.pop("data")) == zlib.decompress(reference.pop("data"))
	assert made == reference
	assert set(PER_FIRE_FIELDS) - {"data"} <= set(made)


def test_rq_reads_the_written_hash(r):
	shape = JobShape(r, TEMPLATES["frappe"], "site1.localhost")
	identifier = job_id("site1.localhost", "TS-000042", SLOT)
	r.hset(
		f"rq:job:{identifier}",
		mapping=released_job_hash(shape, "TS-000042", SLOT, SLOT, SLOT, SLOT + timedelta(milliseconds=2)),
	)
	job = Job.fetch(identifier, connection=r)
	assert job.func_name == "frappe.utils.background_jobs.execute_job"
	assert job.kwargs["kwargs"] == {
		"task": "TASK-0001",
		"schedule": "TS-000042",
		"slot": "2026-03-29T01:30:00Z",
		"fire_at": "2026-03-29T01:30:00Z",
	}
	assert job.timeout == 123 and job.origin == "bench-x:long" and job.get_status() == "queued"
	assert job.enqueued_at.replace(tzinfo=None) == datetime(2026, 3, 29, 1, 30, 0, 2000)
	r.delete(f"rq:job:{identifier}")


@pytest.mark.parametrize("executor", TEMPLATES)
def test_the_stored_template_leaves_out_defaults_and_reads_back_alike(executor):
	template = TEMPLATES[executor]
	stored = template.stored()
	assert JobTemplate.from_dict(json.loads(json.dumps(stored))) == template
	assert (
		"result_ttl" not in stored and "max_concurrent" not in stored and ("function" in stored) == (executor == "rq")
	)
