"""Disabling is an admin's decision, like pausing: a schedule enabled again starts at its next slot.

Catch-up is for fires missed while a schedule was enabled (outages, failover), never for the time
it was off, whether the scheduler saw it disabled or not, and whether Redis kept its state or not.
"""

from __future__ import annotations

import signal
import time
from datetime import datetime, timedelta, timezone

import pytest

from tests.engine.helpers import ONE_SECOND, queue_ids, queue_key, slots_by_schedule, wait_until


def log_run(data, task: str, schedule: str, slot: datetime) -> None:
	"""A Task Log as the task runner writes one for `schedule`'s `slot`."""
	data.insert(
		"BTU Task Log", task=task, schedule=schedule, status="Succeeded", slot_utc=slot.strftime("%Y-%m-%dT%H:%M:%SZ")
	)


@pytest.mark.parametrize("seen_disabled", [True, False], ids=["scheduler-saw-it-off", "enabled-while-scheduler-down"])
def test_enabled_again_starts_at_its_next_slot(seen_disabled, engine_bench, processes, r):
	bench, data = engine_bench()
	task = data.insert_task(
		function_string="tests.engine.tasks.record", arguments={"key": "test:runs"}, desc_short="record"
	)
	name = data.insert_schedule(
		task,
		run_frequency="Cron Style",
		cron_string=ONE_SECOND,
		catch_up_policy="fire_all",
		catch_up_max=100,
		catch_up_window=3600,
	)
	key = queue_key(bench)
	scheduler = processes.scheduler(bench.path, "--full-refresh-interval-secs", "1")
	wait_until(lambda: len(queue_ids(r, key)) >= 2, 20, "fires before the schedule is disabled")
	data.update_schedule(name, enabled=0)
	if not seen_disabled:
		scheduler.signal(signal.SIGKILL)
		scheduler.process.wait()
		r.flushall()  # the scheduler's state from before is gone: only the database knows
	wait_until(
		lambda: seen_disabled is False or not r.hexists(f"btu:site:{data.site.name}:schedule:{name}", "cursor"),
		10,
		"off",
	)
	# The last run the Logs know of was 20 s ago; the schedule was off since.
	log_run(data, task, name, datetime.now(timezone.utc) - timedelta(seconds=20))
	before = set(queue_ids(r, key))
	time.sleep(3)
	data.update_schedule(name, enabled=1)
	enabled_ms = time.time() * 1000
	if not seen_disabled:
		scheduler = processes.scheduler(bench.path, "--full-refresh-interval-secs", "1")
	wait_until(lambda: len(set(queue_ids(r, key)) - before) >= 3, 20, "fires after it is enabled again")
	after = slots_by_schedule([i for i in queue_ids(r, key) if i not in before])[name]
	assert min(after) >= enabled_ms - 1000, (
		f"{sum(slot < enabled_ms - 1000 for slot in after)} slots from while it was disabled were fired on enable"
	)
