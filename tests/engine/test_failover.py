"""High availability: leaders killed with SIGKILL again and again, and a graceful handover on SIGTERM.

Exactly once is read from the queue itself: job ids are deterministic per
(site, schedule, slot), so an id pushed twice is a slot enqueued twice, and a
hole between a schedule's first and last slot is a slot lost. No worker runs:
the queue list keeps every id pushed.

BTU_CHAOS_SECONDS (default 60) sets how long each chaos case kills leaders;
BTU_CHAOS_LEASE_TTL (default 2) the lease TTL the schedulers run with.
"""

from __future__ import annotations

import json
import os
import random
import signal
import time

import pytest

from btu.scheduler_daemon.store.outcomes import JobOutcome
from btu.shared import liveness, protocol
from tests.engine.helpers import (
	ONE_SECOND,
	counters,
	duplicates,
	gaps,
	percentile,
	queue_ids,
	queue_key,
	report,
	slots_by_schedule,
	wait_for_leader,
	wait_until,
	wait_until_serving,
)  # fmt: skip
from tests.support.keys import KEYS
from tests.support.slack import patient

CHAOS_SECONDS = float(os.environ.get("BTU_CHAOS_SECONDS", "60"))
CHAOS_LEASE_TTL = os.environ.get("BTU_CHAOS_LEASE_TTL", "2")
SCHEDULES = 50


def newest_fire_ms(r, site: str) -> int:
	newest = r.lindex(KEYS.recent_fires_key(site), 0)
	return json.loads(newest)["enqueued_ms"] if newest else 0


def every_second_schedules(data, count: int) -> list[str]:
	task = data.insert_task(
		function_string="tests.engine.tasks.record", arguments={"key": "test:runs"}, desc_short="record"
	)
	return [
		data.insert_schedule(
			task, run_frequency="Cron Style", cron_string=ONE_SECOND, catch_up_policy="fire_all", catch_up_max=100
		)
		for _ in range(count)
	]


def assert_exactly_once(r, bench, site: str, names: list[str], stopped_ms: int) -> dict[str, list[int]]:
	ids = queue_ids(r, queue_key(bench))
	assert duplicates(ids) == [], "slots enqueued twice"
	assert counters(r, site).get(JobOutcome.DUPLICATE, 0) == 0, (
		"a fire passed the cursor check for a slot already enqueued"
	)
	slots = slots_by_schedule(ids)
	assert sorted(slots) == sorted(names)
	for name in names:
		assert gaps(slots[name]) == [], f"{name}: slots missing between its first and last"
		assert max(slots[name]) >= stopped_ms - 3000, f"{name}: stopped firing long before the end"
	return slots


@pytest.mark.slow
@pytest.mark.parametrize("count", [2, 3])
def test_leader_killed_every_few_seconds_loses_and_duplicates_nothing(count, engine_bench, processes, r):
	bench, data = engine_bench()
	site = data.site.name
	names = every_second_schedules(data, SCHEDULES)
	flags = ("--lease-ttl-secs", CHAOS_LEASE_TTL)
	for _ in range(count):
		processes.scheduler(bench.path, *flags)
	wait_until(
		lambda: len(slots_by_schedule(queue_ids(r, queue_key(bench)))) == SCHEDULES, 30, "every schedule fired once"
	)
	seed = int(os.environ.get("BTU_CHAOS_SEED", time.time_ns() % 100000))
	rng = random.Random(seed)
	failovers: list[float] = []
	end = time.monotonic() + CHAOS_SECONDS
	while time.monotonic() < end:
		time.sleep(rng.uniform(3, 6))
		leader = wait_for_leader(r, processes)
		leader.kill()
		dead_ms = time.time() * 1000
		processes.scheduler(bench.path, *flags)
		first = wait_until(
			lambda: (lambda ms: ms if ms > dead_ms else None)(newest_fire_ms(r, site)), 30, "a new leader fired", 0.002
		)
		failovers.append(first - dead_ms)
		assert len(processes.running()) == count
	wait_until_serving(r, processes)
	for scheduler in processes.running():
		assert scheduler.stop() == 0
	stopped_ms = int(time.time() * 1000)
	slots = assert_exactly_once(r, bench, site, names, stopped_ms)
	assert failovers, "no leader was killed: raise BTU_CHAOS_SECONDS"
	assert all(scheduler.alive() is False for scheduler in processes.schedulers)
	total = sum(len(s) for s in slots.values())
	report(
		f"failover after SIGKILL, {count} schedulers",
		f"{len(failovers)} kills in {CHAOS_SECONDS:.0f} s (lease TTL {CHAOS_LEASE_TTL} s, seed {seed}), "
		"kill -> first fire of the new leader: "
		f"p50 {percentile(failovers, 50):.0f} ms, max {max(failovers):.0f} ms; "
		f"{total} jobs for {SCHEDULES} schedules, none twice, none missing",
	)


def test_sigterm_hands_the_lease_over_at_once(engine_bench, processes, r):
	bench, data = engine_bench()
	site = data.site.name
	names = every_second_schedules(data, 5)
	# A lease left to expire would take 30 s: a quick takeover proves the release.
	flags = ("--lease-ttl-secs", "30")
	first = processes.scheduler(bench.path, *flags)
	assert wait_for_leader(r, processes) is first
	processes.scheduler(bench.path, *flags)
	wait_until(lambda: r.zcard(KEYS.processes) == 2, 20, "the standby's heartbeat")
	wait_until(lambda: newest_fire_ms(r, site), 20, "a first fire")
	time.sleep(1.3)
	sent = time.time()
	first.signal(signal.SIGTERM)
	wait_for_leader(r, processes, timeout=35, other_than=first.pid)
	took_over_ms = (time.time() - sent) * 1000
	fired_ms = wait_until(
		lambda: (lambda ms: ms if ms > sent * 1000 + took_over_ms else None)(newest_fire_ms(r, site)),
		10,
		"a fire by the new leader",
		0.002,
	)
	assert first.process.wait(patient(10)) == 0
	time.sleep(2)
	for scheduler in processes.running():
		assert scheduler.stop() == 0
	assert_exactly_once(r, bench, site, names, int(time.time() * 1000))
	# Well under the 30 s the lease would take to expire, however wide the slack.
	assert took_over_ms < min(patient(5), 25) * 1000, f"takeover took {took_over_ms:.0f} ms: the lease was not released"
	report(
		"takeover after SIGTERM",
		f"SIGTERM -> standby holds the lease: {took_over_ms:.0f} ms; "
		f"-> its first fire: {fired_ms - sent * 1000:.0f} ms "
		"(fires fall on whole seconds, so this includes the wait for the next slot)",
	)


def test_a_stopped_scheduler_leaves_the_process_list_at_once(engine_bench, processes, r):
	"""Not read as alive, nor as leader, until its heartbeat expires (the Desk's panel, `status`, the Desk's
	announcements)."""
	bench, data = engine_bench()
	scheduler = processes.scheduler(bench.path)
	assert wait_for_leader(r, processes) is scheduler
	wait_until(lambda: any(p["pid"] == scheduler.pid for p in liveness.processes(r, KEYS)), 20, "its heartbeat")
	assert scheduler.stop() == 0
	assert liveness.processes(r, KEYS) == [] and r.zcard(KEYS.processes) == 0
