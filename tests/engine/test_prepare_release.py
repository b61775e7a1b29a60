"""A fire in two steps, driven in-process: prepared ahead (slot claimed, job written, on no queue), released at its
moment.

Each test runs the leader's steps by hand on a real Redis and MariaDB, so it can look between them.
"""

from __future__ import annotations

import json
import time
import zlib
from datetime import datetime, timezone

import pytest
from rq.job import Job

from btu.scheduler_daemon.leading.engine import Scheduler
from btu.scheduler_daemon.operations.config import Config
from btu.scheduler_daemon.store.jobs import JobShape, JobTemplate, rq_time
from btu.scheduler_daemon.store.outcomes import FireOutcome
from btu.shared import protocol
from tests.engine.helpers import ONE_SECOND, definition, parse_job_id, queue_ids, queue_key, recent_fires, rq_job_hash
from tests.support.keys import KEYS

pytestmark = pytest.mark.versions


def leader(bench, **settings) -> Scheduler:
	settings.setdefault("misfire_grace_secs", 10.0)
	# No engine renews this lease: it must outlast a test's steps (status subprocesses among them) on a loaded machine.
	settings.setdefault("lease_ttl_secs", 60.0)
	scheduler = Scheduler(Config(bench=str(bench.path), executor="rq", prepare_ahead_secs=2.0, **settings), bench.path)
	assert scheduler.lease.acquire()
	scheduler.reconciler.full()
	return scheduler


def prepare_due(scheduler: Scheduler) -> list[tuple[str, str, int]]:
	due = scheduler.state.due(scheduler.config.batch_size, scheduler.firing.ahead_ms)
	assert not scheduler.firing.prepare(due).fenced
	return due.entries


def release(scheduler: Scheduler) -> bool:
	"""What the leader's loop does at a moment: False when fenced off."""
	return not scheduler.firing.release().fenced


def sleep_until_ms(moment_ms: float) -> None:
	time.sleep(max(0.0, moment_ms / 1000 - time.time()))


def once_at(data, task: str, moment: float, **fields) -> str:
	return data.insert_schedule(
		task, run_frequency="Once", run_at=datetime.fromtimestamp(moment, timezone.utc), **fields
	)


def next_instant() -> float:
	"""The whole second 1 to 2 s away: inside the 2 s prepare window, far enough to look before it."""
	return float(int(time.time()) + 2)


@pytest.fixture
def site(engine_bench):
	bench, data = engine_bench()
	task = data.insert_task(
		function_string="tests.engine.tasks.record", arguments={"key": "test:runs"}, desc_short="record"
	)
	return bench, data, task


def state(r, site_name: str, name: str, field: str) -> str | None:
	value = r.hget(KEYS.schedule_key(site_name, name), field)
	return value.decode() if value is not None else None


def test_prepared_job_is_written_ahead_and_queued_at_its_moment_once(site, r):
	bench, data, task = site
	instant = next_instant()
	name = once_at(data, task, instant)
	scheduler = leader(bench)
	assert prepare_due(scheduler) == [(data.site.name, name, int(instant * 1000))]

	key = queue_key(bench)
	[member] = r.zrange(KEYS.prepared, 0, -1)
	job_id = member.decode().split("\t")[0]
	assert r.hget(f"rq:job:{job_id}", "status") == b"scheduled"
	assert r.hget(f"rq:job:{job_id}", "enqueued_at") is None
	assert queue_ids(r, key) == [], "a prepared job is on no queue before its moment"
	assert state(r, data.site.name, name, "finished") == "1", "the slot was claimed when prepared"
	assert release(scheduler) and queue_ids(r, key) == [], "nothing is released before its moment"

	sleep_until_ms(instant * 1000)
	before = datetime.now(timezone.utc)
	assert release(scheduler)
	after = datetime.now(timezone.utc)
	assert queue_ids(r, key) == [job_id]
	assert r.zcard(KEYS.prepared) == 0
	assert release(scheduler) and queue_ids(r, key) == [job_id], "released once"

	stored = {k.decode(): v for k, v in r.hgetall(f"rq:job:{job_id}").items()}
	job = Job.fetch(job_id, connection=r)
	assert job.get_status() == "queued"
	# enqueued_at, stamped by the release script from Redis's clock, is exactly what rq writes.
	assert stored["enqueued_at"].decode() == rq_time(job.enqueued_at.replace(tzinfo=timezone.utc))
	assert before.replace(microsecond=0) <= job.enqueued_at.replace(tzinfo=timezone.utc) <= after
	# The whole hash is what rq's own Job.create(...).to_dict() makes.
	template = JobTemplate.from_dict(json.loads(definition(r, data.site.name, name)[1]))
	slot = datetime.fromtimestamp(instant, timezone.utc)
	reference = rq_job_hash(
		JobShape(r, template, data.site.name),
		name,
		slot,
		slot,
		job.created_at.replace(tzinfo=timezone.utc),
		job.enqueued_at.replace(tzinfo=timezone.utc),
	)
	assert zlib.decompress(stored.pop("data")) == zlib.decompress(reference.pop("data"))
	assert {k: v.decode() for k, v in stored.items()} == {k: str(getattr(v, "value", v)) for k, v in reference.items()}
	[fire] = [f for f in recent_fires(r, data.site.name) if f["schedule"] == name]
	assert fire["outcome"] == FireOutcome.ENQUEUED and 0 <= fire["lag_ms"] < 1000


def test_removed_paused_or_edited_after_prepare_is_withdrawn(site, r):
	bench, data, task = site
	instant = next_instant()
	removed, paused, edited, kept = (once_at(data, task, instant) for _ in range(4))
	scheduler = leader(bench)
	assert len(prepare_due(scheduler)) == 4
	assert len(r.keys("rq:job:*")) == 4

	data.delete_schedule(removed)
	scheduler.reconciler.sync(data.site.name, [removed])
	data.update_schedule(paused, paused=1)
	scheduler.reconciler.sync(data.site.name, [paused])
	data.update_schedule(edited, run_at=datetime.fromtimestamp(instant + 3600, timezone.utc))
	scheduler.reconciler.sync(data.site.name, [edited])

	members = [m.decode() for m in r.zrange(KEYS.prepared, 0, -1)]
	assert [parse_job_id(m.split("\t")[0])[0] for m in members] == [kept], (
		"only the untouched schedule's fire stays prepared"
	)
	assert len(r.keys("rq:job:*")) == 1, "a withdrawn fire leaves no job behind"
	assert state(r, data.site.name, paused, "runs") == "0", "a withdrawn fire is not counted as a run"
	assert state(r, data.site.name, edited, "fire_at") == str(int((instant + 3600) * 1000)), (
		"the edit took effect before the prepared fire"
	)

	sleep_until_ms(instant * 1000)
	assert release(scheduler)
	ids = queue_ids(r, queue_key(bench))
	assert [parse_job_id(job_id)[0] for job_id in ids] == [kept]
	assert {f["schedule"]: f["outcome"] for f in recent_fires(r, data.site.name)} == {kept: FireOutcome.ENQUEUED}


def test_a_new_leader_releases_what_the_old_one_prepared_and_fences_it(site, r):
	bench, data, task = site
	instant = next_instant()
	name = once_at(data, task, instant)
	old = leader(bench)
	prepare_due(old)
	old.lease.release()
	new = leader(bench)
	assert new.lease.value != old.lease.value

	sleep_until_ms(instant * 1000)
	assert release(old) is False, "a former leader's release is fenced off"
	assert queue_ids(r, queue_key(bench)) == []
	assert release(new)
	assert release(new)
	[job_id] = queue_ids(r, queue_key(bench))
	assert parse_job_id(job_id)[0] == name


@pytest.mark.parametrize("policy, queued", [("skip", 0), ("fire_once", 1)])
def test_a_fire_released_after_the_grace_goes_back_to_its_catch_up_policy(site, r, policy, queued):
	bench, data, task = site
	instant = next_instant()
	name = once_at(data, task, instant, catch_up_policy=policy)
	scheduler = leader(bench, misfire_grace_secs=0.3)
	prepare_due(scheduler)
	sleep_until_ms(instant * 1000 + 600)  # no leader released it in time

	assert release(scheduler)
	assert r.zcard(KEYS.prepared) == 0
	assert r.keys("rq:job:*") == [], "the late job was withdrawn"
	assert state(r, data.site.name, name, "cursor") == str(int(instant * 1000)), "the slot is pending again"
	assert state(r, data.site.name, name, "finished") == "0"
	assert state(r, data.site.name, name, "runs") == "0"

	prepare_due(scheduler)  # the plan now sees a missed slot
	assert release(scheduler)
	assert len(queue_ids(r, queue_key(bench))) == queued
	assert int(state(r, data.site.name, name, "skipped_missed") or 0) == 1 - queued
	assert state(r, data.site.name, name, "finished") == "1"


def test_overlap_skip_is_decided_at_release(site, r):
	bench, data, task = site
	data.insert_schedule(task, run_frequency="Cron Style", cron_string=ONE_SECOND, overlap_policy="skip")
	scheduler = leader(bench)
	prepare_due(scheduler)
	slots = sorted(int(m.decode().split("\t")[5]) for m in r.zrange(KEYS.prepared, 0, -1))
	assert len(slots) >= 2, "two seconds ahead holds at least two slots of an every-second schedule"

	sleep_until_ms(slots[0])
	assert release(scheduler)
	assert len(queue_ids(r, queue_key(bench))) == 1  # no worker: it stays queued
	sleep_until_ms(slots[1])
	assert release(scheduler)
	assert len(queue_ids(r, queue_key(bench))) == 1
	outcomes = [f["outcome"] for f in sorted(recent_fires(r, data.site.name), key=lambda f: f["slot_ms"])]
	assert outcomes[:2] == [FireOutcome.ENQUEUED, FireOutcome.SKIPPED_OVERLAP]


@pytest.mark.parametrize("release_batch_size", [10000, 3])
def test_an_instant_is_released_in_batches_of_release_batch_size(site, r, release_batch_size):
	bench, data, task = site
	instant = next_instant()
	names = [once_at(data, task, instant) for _ in range(7)]
	scheduler = leader(bench, release_batch_size=release_batch_size)
	prepare_due(scheduler)
	assert r.zcard(KEYS.prepared) == 7

	sleep_until_ms(instant * 1000)
	assert release(scheduler)
	ids = queue_ids(r, queue_key(bench))
	assert sorted(parse_job_id(job_id)[0] for job_id in ids) == sorted(names), "each fire queued once"
	# One script stamps one enqueued_at: the number of stamps is the number of scripts it took.
	stamps = {r.hget(f"rq:job:{job_id}", "enqueued_at") for job_id in ids}
	assert len(stamps) == (1 if release_batch_size >= 7 else 3)
