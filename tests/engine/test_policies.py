"""Catch-up and overlap policies, end to end with scheduler processes and an `rq worker`."""

from __future__ import annotations

import json
import time

import pytest

from btu.scheduler_daemon.store.outcomes import FireOutcome
from btu.shared import protocol
from tests.engine.helpers import (
	ONE_SECOND,
	counters,
	queue_ids,
	queue_key,
	recent_fires,
	slots_by_schedule,
	status_json,
	stop_worker,
	text,
	wait_until,
)
from tests.support.keys import KEYS

pytestmark = pytest.mark.versions

GRACE = "0.5"


def test_catch_up_after_the_scheduler_was_down(engine_bench, processes, r):
	bench, data = engine_bench()
	site = data.site.name
	task = data.insert_task(
		function_string="tests.engine.tasks.record", arguments={"key": "test:runs"}, desc_short="record"
	)
	every_second = {"run_frequency": "Cron Style", "cron_string": ONE_SECOND}
	once = data.insert_schedule(task, catch_up_policy="fire_once", **every_second)
	skip = data.insert_schedule(task, catch_up_policy="skip", **every_second)
	cap = data.insert_schedule(task, catch_up_policy="fire_all", catch_up_max=3, **every_second)
	names = (once, skip, cap)
	flags = ("--misfire-grace-secs", GRACE)
	first = processes.scheduler(bench.path, *flags)
	wait_until(lambda: len(recent_fires(r, site)) >= 6, 30, "two fires of each schedule")
	assert first.stop() == 0
	last = {name: max(f["slot_ms"] for f in recent_fires(r, site) if f["schedule"] == name) for name in names}
	time.sleep(6)
	restarted_ms = time.time() * 1000
	second = processes.scheduler(bench.path, *flags)

	def after_restart():
		fires = [f for f in recent_fires(r, site) if f["enqueued_ms"] > restarted_ms]
		return fires if all(sum(f["schedule"] == n for f in fires) >= 4 for n in names) else None

	fires = wait_until(after_restart, 30, "fires after the restart")
	assert second.stop() == 0
	assert duplicates_free(queue_ids(r, queue_key(bench)))
	for name in names:
		mine = sorted((f for f in fires if f["schedule"] == name), key=lambda f: f["slot_ms"])
		assert {f["outcome"] for f in mine} == {FireOutcome.ENQUEUED}
		fired = [f["slot_ms"] for f in mine]
		assert fired == list(range(fired[0], fired[0] + 1000 * len(fired), 1000)), (
			f"{name}: fires after the catch-up are consecutive"
		)
		unfired = (fired[0] - last[name]) // 1000 - 1
		skipped = int(r.hget(KEYS.schedule_key(site, name), "skipped_missed") or 0)
		assert skipped == unfired, f"{name}: the {unfired} slots neither fired nor counted as skipped"
		catch_up = mine[0]["enqueued_ms"]
		lags = [catch_up - f["slot_ms"] for f in mine]
		if name == skip:
			assert unfired >= 4, "skip fires none of the missed slots"
			assert lags[0] <= 550, "skip: the first fire after the restart is on time"
		elif name == once:
			assert unfired >= 3, "fire_once: of ~5 missed slots only the latest fires"
			assert lags[0] >= 450 and lags[1] <= 550, "fire_once: one missed slot (the latest) fires, then on-time ones"
		else:
			assert unfired >= 2, "fire_all: ~5 slots were missed and only 3 may fire"
			assert [mine[i]["enqueued_ms"] for i in range(3)] == [catch_up] * 3, (
				"fire_all: the capped catch-up fires at once"
			)
			assert lags[2] >= 450 and lags[3] <= 550, "fire_all: the latest catch_up_max (3) missed slots fire"
	assert counters(r, site).get("skipped_missed", 0) >= 8


def test_a_schedule_deleted_or_disabled_while_no_scheduler_ran_fires_none_of_its_missed_slots(
	engine_bench, processes, r
):
	"""The next leader's catch-up waits for its first reconcile: the Redis state still holds the schedules as they were
	when the last leader stopped, and firing from it would run slots of rows that are gone or switched off."""
	bench, data = engine_bench()
	site = data.site.name
	task = data.insert_task(
		function_string="tests.engine.tasks.record", arguments={"key": "test:runs"}, desc_short="record"
	)
	every_second = {"run_frequency": "Cron Style", "cron_string": ONE_SECOND, "catch_up_policy": "fire_all"}
	kept, deleted, disabled = (data.insert_schedule(task, catch_up_max=10, **every_second) for _ in range(3))
	flags = ("--misfire-grace-secs", GRACE)
	first = processes.scheduler(bench.path, *flags)
	wait_until(lambda: len(recent_fires(r, site)) >= 6, 30, "two fires of each schedule")
	assert first.stop() == 0
	before = slots_by_schedule(queue_ids(r, queue_key(bench)))
	data.delete_schedule(deleted)
	data.update_schedule(disabled, enabled=0)
	time.sleep(3)  # slots missed, more than the grace ago
	restarted_ms = time.time() * 1000
	second = processes.scheduler(bench.path, *flags)
	wait_until(
		lambda: sum(f["schedule"] == kept and f["enqueued_ms"] > restarted_ms for f in recent_fires(r, site)) >= 5,
		30,
		"the kept schedule's catch-up and on-time fires",
	)
	assert second.stop() == 0
	after = [f for f in recent_fires(r, site) if f["enqueued_ms"] > restarted_ms]
	assert {f["schedule"] for f in after} == {kept}, f"only the kept schedule fired after the restart: {after}"
	resumed = sorted(f["slot_ms"] for f in after)
	assert resumed[0] == max(before[kept]) + 1000 < restarted_ms - 1000 * float(GRACE), (
		f"the kept one's missed slots fired, from the first after its last: {resumed}, {before[kept]}"
	)
	queued = slots_by_schedule(queue_ids(r, queue_key(bench)))
	assert [queued[deleted], queued[disabled]] == [before[deleted], before[disabled]], "neither was fired again"


def duplicates_free(ids: list[str]) -> bool:
	return len(ids) == len(set(ids))


def test_overlap_skip_while_the_previous_run_is_queued_or_started(engine_bench, processes, r, redis_url):
	bench, data = engine_bench()
	site = data.site.name
	runs_key = "test:slow-runs"
	task = data.insert_task(
		function_string="tests.engine.tasks.record_slowly",
		arguments={"key": runs_key, "seconds": 2.5},
		desc_short="slow",
	)
	data.insert_schedule(task, run_frequency="Cron Style", cron_string=ONE_SECOND, overlap_policy="skip")
	scheduler = processes.scheduler(bench.path)
	# No worker yet: the first job stays queued, so every later slot is skipped.
	wait_until(lambda: len(recent_fires(r, site)) >= 4, 30, "four slots handled")
	queued_phase = recent_fires(r, site)
	assert [f["outcome"] for f in queued_phase][:4] == [FireOutcome.ENQUEUED] + [FireOutcome.SKIPPED_OVERLAP] * 3
	worker = processes.worker(redis_url, bench.queue_name("default"))
	wait_until(lambda: r.llen(runs_key) >= 3, 60, "three slow runs", interval=0.2)
	assert scheduler.stop() == 0
	stop_worker(worker)
	runs = sorted((json.loads(text(x)) for x in r.lrange(runs_key, 0, -1)), key=lambda run: run["started"])
	for previous, run in zip(runs, runs[1:]):
		assert run["started"] >= previous["ended"], "two runs of the schedule overlapped"
	fires = recent_fires(r, site)
	enqueued = [f for f in fires if f["outcome"] == FireOutcome.ENQUEUED]
	skipped = [f for f in fires if f["outcome"] == FireOutcome.SKIPPED_OVERLAP]
	assert len(skipped) >= 6 and len(enqueued) >= 3
	assert not any(r.exists(f"rq:job:{f['job_id']}") for f in skipped), "a skipped slot has no job"
	for run in runs:
		assert run["id"] in {f["job_id"] for f in enqueued}
	summary = status_json(bench.path)
	assert summary["sites"][site]["counters"][FireOutcome.SKIPPED_OVERLAP] == len(skipped)
