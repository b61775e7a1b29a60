"""A Task's concurrency limit (BTU Task.max_concurrent_runs), applied by release.lua across all its schedules.

End to end with scheduler processes and two `rq worker`s (so a broken limit would let two runs overlap), through
a leader failover; and driven in-process on a real Redis for one batch, wrong values in the Task's running set and
prepared members written by the version before limits.
"""

from __future__ import annotations

import json
import time

import pytest

from btu.scheduler_daemon.store.outcomes import FireOutcome
from btu.shared import protocol
from btu.shared.keys import MAX_CONCURRENT_RUNS
from tests.engine.helpers import (
	ONE_SECOND,
	counters,
	definition,
	queue_ids,
	queue_key,
	recent_fires,
	status_json,
	stop_worker,
	text,
	wait_for_leader,
	wait_until,
)
from tests.engine.test_prepare_release import leader, next_instant, once_at, prepare_due, release, sleep_until_ms
from tests.support.keys import KEYS

pytestmark = pytest.mark.versions

SLOW = 1.5


def slow_task(data, runs_key: str, limit: int) -> str:
	return data.insert_task(
		function_string="tests.engine.tasks.record_slowly",
		arguments={"key": runs_key, "seconds": SLOW},
		desc_short="slow",
		max_concurrent_runs=limit,
	)


def runs(r, key: str) -> list[dict]:
	return sorted((json.loads(text(x)) for x in r.lrange(key, 0, -1)), key=lambda run: run["started"])


def assert_one_at_a_time(found: list[dict]) -> None:
	for previous, run in zip(found, found[1:]):
		assert run["started"] >= previous["ended"], f"two runs of the task overlapped: {previous} and {run}"


def test_limit_one_across_two_schedules_never_runs_two_at_once(engine_bench, processes, r, redis_url):
	bench, data = engine_bench()
	site = data.site.name
	runs_key = "test:limited-runs"
	task = slow_task(data, runs_key, 1)
	names = [data.insert_schedule(task, run_frequency="Cron Style", cron_string=ONE_SECOND) for _ in range(2)]
	scheduler = processes.scheduler(bench.path)
	workers = [processes.worker(redis_url, bench.queue_name("default")) for _ in range(2)]
	wait_until(lambda: len(runs(r, runs_key)) >= 4, 60, "four slow runs", interval=0.2)
	assert scheduler.stop() == 0
	for worker in workers:
		stop_worker(worker)
	found = runs(r, runs_key)
	assert_one_at_a_time(found)
	fires = recent_fires(r, site)
	enqueued = [f for f in fires if f["outcome"] == FireOutcome.ENQUEUED]
	skipped = [f for f in fires if f["outcome"] == FireOutcome.SKIPPED_CONCURRENCY]
	assert {f["schedule"] for f in enqueued} <= set(names) and {f["schedule"] for f in skipped} == set(names)
	assert len(skipped) >= 4, "every slot of either schedule while a run was queued or started is skipped"
	assert not any(r.exists(f"rq:job:{f['job_id']}") for f in skipped), "a skipped slot has no job"
	assert {run["id"] for run in found} <= {f["job_id"] for f in enqueued}
	assert counters(r, site)[FireOutcome.SKIPPED_CONCURRENCY] == len(skipped)
	assert status_json(bench.path)["sites"][site]["counters"][FireOutcome.SKIPPED_CONCURRENCY] == len(skipped)
	logged = [line for line in scheduler.log().splitlines() if " skipped_concurrency " in line]
	assert len(logged) == len(skipped)
	assert all(
		f"site={site}" in line and f"task={task}" in line and "limit=1" in line and "slot=" in line for line in logged
	)
	assert any(f"schedule={names[0]}" in line for line in logged) and any(
		f"schedule={names[1]}" in line for line in logged
	)


def test_limit_holds_across_a_leader_failover(engine_bench, processes, r, redis_url):
	bench, data = engine_bench()
	site = data.site.name
	runs_key = "test:failover-runs"
	task = slow_task(data, runs_key, 1)
	for _ in range(2):
		data.insert_schedule(task, run_frequency="Cron Style", cron_string=ONE_SECOND)
	flags = ("--lease-ttl-secs", "2")
	for _ in range(2):
		processes.scheduler(bench.path, *flags)
	workers = [processes.worker(redis_url, bench.queue_name("default")) for _ in range(2)]
	wait_until(lambda: len(runs(r, runs_key)) >= 2, 60, "two slow runs", interval=0.2)
	first = wait_for_leader(r, processes)
	first.kill()
	killed_ms = time.time() * 1000
	wait_for_leader(r, processes, other_than=first.pid)
	wait_until(
		lambda: sum(run["started"] * 1000 > killed_ms for run in runs(r, runs_key)) >= 2,
		60,
		"two runs after the failover",
		interval=0.2,
	)
	for scheduler in processes.running():
		assert scheduler.stop() == 0
	for worker in workers:
		stop_worker(worker)
	assert_one_at_a_time(runs(r, runs_key))
	assert counters(r, site)[FireOutcome.SKIPPED_CONCURRENCY] >= 2


def test_schedules_of_one_task_released_in_one_batch_respect_the_limit(engine_bench, r):
	bench, data = engine_bench()
	site = data.site.name
	limited = data.insert_task(
		function_string="tests.engine.tasks.record",
		arguments={"key": "test:runs"},
		desc_short="two",
		max_concurrent_runs=2,
	)
	free = data.insert_task(
		function_string="tests.engine.tasks.record", arguments={"key": "test:runs"}, desc_short="free"
	)
	instant = next_instant()
	names = [once_at(data, limited, instant) for _ in range(3)]
	others = [once_at(data, free, instant) for _ in range(2)]
	scheduler = leader(bench)
	assert len(prepare_due(scheduler)) == 5
	members = {m.decode().split("\t")[0]: m.decode() for m in r.zrange(KEYS.prepared, 0, -1)}
	assert sorted(len(m.split("\t")) for m in members.values()) == [9, 9, 11, 11, 11], (
		"only a limited task's members carry it"
	)
	sleep_until_ms(instant * 1000)
	assert release(scheduler)
	outcomes = {f["schedule"]: f["outcome"] for f in recent_fires(r, site)}
	assert sorted(outcomes[name] for name in names) == [
		FireOutcome.ENQUEUED,
		FireOutcome.ENQUEUED,
		FireOutcome.SKIPPED_CONCURRENCY,
	]
	assert [outcomes[name] for name in others] == [FireOutcome.ENQUEUED, FireOutcome.ENQUEUED]
	assert len(queue_ids(r, queue_key(bench))) == 4
	running = {text(m) for m in r.smembers(KEYS.task_running_key(site, limited))}
	assert running == {
		f["job_id"] for f in recent_fires(r, site) if f["schedule"] in names and f["outcome"] == FireOutcome.ENQUEUED
	}
	assert r.ttl(KEYS.task_running_key(site, limited)) > 6 * 24 * 3600
	assert not r.exists(KEYS.task_running_key(site, free)), "a task without a limit keeps no running set"
	assert counters(r, site)[FireOutcome.SKIPPED_CONCURRENCY] == 1
	assert scheduler.metrics.skips["concurrency"] == 1


def fire_once(scheduler, data, task: str) -> str:
	"""A Once schedule of `task` at the next whole second, synced, prepared and released by `scheduler`; its name."""
	instant = next_instant()
	name = once_at(data, task, instant)
	scheduler.reconciler.sync(data.site.name, [name])
	assert scheduler.lease.renew()
	prepare_due(scheduler)
	sleep_until_ms(instant * 1000)
	assert release(scheduler)
	return name


def test_finished_or_gone_jobs_stop_counting(engine_bench, r):
	bench, data = engine_bench()
	site = data.site.name
	task = data.insert_task(
		function_string="tests.engine.tasks.record",
		arguments={"key": "test:runs"},
		desc_short="one",
		max_concurrent_runs=1,
	)
	key = KEYS.task_running_key(site, task)
	scheduler = leader(bench)
	for status in ("finished", "failed", None):
		name = fire_once(scheduler, data, task)
		[job_id] = [text(m) for m in r.smembers(key)]
		assert {f["schedule"]: f["outcome"] for f in recent_fires(r, site)}[name] == FireOutcome.ENQUEUED, (
			f"after a job {status}"
		)
		if status is None:
			r.delete(f"rq:job:{job_id}")
		else:
			r.hset(f"rq:job:{job_id}", "status", status)
	name = fire_once(scheduler, data, task)
	assert {f["schedule"]: f["outcome"] for f in recent_fires(r, site)}[name] == FireOutcome.ENQUEUED
	assert r.scard(key) == 1, "ids of jobs no longer queued or started left the set"


def test_a_wrong_running_set_is_moved_aside_and_garbage_ids_dropped(engine_bench, r):
	bench, data = engine_bench()
	site = data.site.name
	wrong, garbage, oversized = (
		data.insert_task(
			function_string="tests.engine.tasks.record",
			arguments={"key": "test:runs"},
			desc_short=f"t{i}",
			max_concurrent_runs=1,
		)
		for i in range(3)
	)
	r.set(KEYS.task_running_key(site, wrong), "not a set")
	r.set("rq:job:a-string-not-a-hash", "x")
	r.sadd(KEYS.task_running_key(site, garbage), "no such job", "\x00\t\n" * 50, "a-string-not-a-hash")
	r.sadd(KEYS.task_running_key(site, oversized), *(f"id{i}" for i in range(1001)))
	instant = next_instant()
	names = {task: once_at(data, task, instant) for task in (wrong, garbage, oversized)}
	scheduler = leader(bench)
	prepare_due(scheduler)
	sleep_until_ms(instant * 1000)
	assert release(scheduler)
	outcomes = {f["schedule"]: f["outcome"] for f in recent_fires(r, site)}
	assert [outcomes[names[task]] for task in (wrong, garbage, oversized)] == [FireOutcome.ENQUEUED] * 3
	for task in (wrong, garbage, oversized):
		assert r.smembers(KEYS.task_running_key(site, task)) == {
			f["job_id"].encode() for f in recent_fires(r, site) if f["schedule"] == names[task]
		}
	quarantine = {text(k): json.loads(v) for k, v in r.hgetall(KEYS.quarantine).items()}
	assert "not a set" not in json.dumps(quarantine) and quarantine[KEYS.task_running_key(site, wrong)][
		"reason"
	].startswith("WRONGTYPE")
	assert "1001 job ids" in quarantine[KEYS.task_running_key(site, oversized)]["reason"]
	assert r.type(KEYS.quarantined_prefix + KEYS.task_running_key(site, wrong)) == b"string"
	assert r.get("rq:job:a-string-not-a-hash") == b"x", "a job key of another type is not BTU's to move"


def test_members_prepared_by_the_version_before_limits_still_release(engine_bench, r):
	bench, data = engine_bench()
	site = data.site.name
	task = data.insert_task(
		function_string="tests.engine.tasks.record", arguments={"key": "test:runs"}, desc_short="old"
	)
	instant = next_instant()
	old, bad = once_at(data, task, instant), once_at(data, task, instant)
	scheduler = leader(bench)
	prepare_due(scheduler)
	members = sorted(m.decode() for m in r.zrange(KEYS.prepared, 0, -1))
	assert [len(m.split("\t")) for m in members] == [9, 9], "a task without a limit writes members as before"
	# What the version before limits wrote is exactly these nine fields; a tenth and eleventh that are no task
	# and limit are not a member prepare.lua writes.
	[bad_member] = [m for m in members if f"|{bad}\t" in m]
	r.zrem(KEYS.prepared, bad_member)
	r.zadd(KEYS.prepared, {bad_member + "\tBTU-1\t0": int(instant * 1000)})
	sleep_until_ms(instant * 1000)
	assert release(scheduler)
	outcomes = {f["schedule"]: f["outcome"] for f in recent_fires(r, site)}
	assert outcomes == {old: FireOutcome.ENQUEUED}
	assert r.zcard(KEYS.prepared) == 0
	[reason] = [
		json.loads(v)["reason"] for k, v in r.hgetall(KEYS.quarantine).items() if text(k).startswith(KEYS.prepared)
	]
	assert "a task and a limit of 1 or more" in reason


def test_the_limit_reaches_the_state_and_follows_edits_of_the_task(engine_bench, r):
	bench, data = engine_bench()
	site = data.site.name
	task = data.insert_task(
		function_string="tests.engine.tasks.record",
		arguments={"key": "test:runs"},
		desc_short="edited",
		max_concurrent_runs=3,
	)
	name = data.insert_schedule(task, run_frequency="Cron Style", cron_string="0 3 * * *")
	scheduler = leader(bench)

	def limit() -> int:
		return json.loads(definition(r, site, name)[1]).get("max_concurrent", 0)  # a default is not stored

	assert limit() == 3
	data.update("BTU Task", task, max_concurrent_runs=1)
	scheduler.reconciler.full()
	assert limit() == 1, "a full reconcile sees the task's edit"
	data.update("BTU Task", task, max_concurrent_runs=0)
	scheduler.reconciler.sync(site, [name])
	assert limit() == 0, "so does the schedule's sync the Task's save announces"
	data.update("BTU Task", task, max_concurrent_runs=MAX_CONCURRENT_RUNS + 1)
	scheduler.reconciler.sync(site, [name])
	invalid = {text(k): text(v) for k, v in r.hgetall(KEYS.invalid_rows_key(site)).items()}
	assert f"max_concurrent_runs {MAX_CONCURRENT_RUNS + 1}" in invalid[name]
	assert not r.exists(KEYS.schedule_key(site, name))
