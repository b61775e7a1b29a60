"""Run request arithmetic shared by both sides: names, retry delays, whole-second run_at, the Once row."""

from __future__ import annotations

from datetime import datetime, timezone

import pytest

from btu.shared import run_requests as rr
from btu.shared.run_kind import RunKey, RunKind
from btu.shared.schedule import ScheduleSpec

pytestmark = pytest.mark.versions


def test_names_are_one_per_run_and_never_collide_across_kinds():
	slot = datetime(2026, 11, 24, 2, 30, tzinfo=timezone.utc)
	assert rr.slot_request_name("TS-1", slot, 2) == rr.slot_request_name("TS-1", slot, 2)
	names = {
		rr.slot_request_name("TS-1", slot, 1),
		rr.slot_request_name("TS-1", slot, 2),
		rr.slot_request_name("TS-2", slot, 2),
		rr.chain_request_name("LOG-1", "BTU-1"),
		rr.chain_request_name("LOG-1", "BTU-1", 2),
		rr.chain_request_name("LOG-1", "BTU-2"),
		# Look-alikes: a separator inside a name must not make two keys one.
		rr.request_name("a|b", "c"),
		rr.request_name("a", "b|c"),
	}
	assert len(names) == 8
	assert all(len(name) <= 140 and name.startswith("RR-") for name in names)
	assert (
		RunKey.parse(RunKey(RunKind.RUN_REQUEST, "RR-x").format()).name == "RR-x"
		and RunKey.parse("run-request:RR-x").kind is RunKind.RUN_REQUEST
		and RunKey.parse("TS-run-request:").kind is not RunKind.RUN_REQUEST
	)


@pytest.mark.parametrize(
	("attempt", "initial", "factor", "maximum", "expected"),
	[
		(2, 60, 2, 3600, 60),
		(3, 60, 2, 3600, 120),
		(4, 60, 2, 3600, 240),
		(9, 60, 2, 3600, 3600),
		(3, 10, 1, 0, 10),
		# No cap, or one above it: at most MAX_RETRY_DELAY_SECS, also where the power overflows a float.
		(100, 60, 10, 0, rr.MAX_RETRY_DELAY_SECS),
		(400, 60, 10, 0, rr.MAX_RETRY_DELAY_SECS),
		(3, 60, 2, 10**12, 120),
		(30, 60, 2, 10**12, rr.MAX_RETRY_DELAY_SECS),
	],
)
def test_retry_delay_grows_by_the_factor_up_to_the_cap(attempt, initial, factor, maximum, expected):
	assert rr.retry_delay(attempt, initial, factor, maximum) == expected


def test_retry_delay_refuses_a_first_attempt():
	with pytest.raises(ValueError, match="attempt 1"):
		rr.retry_delay(1, 60, 2, 0)


def test_run_at_is_never_before_the_moment_asked():
	moment = datetime(2026, 11, 24, 2, 30, 0, 1, tzinfo=timezone.utc)
	assert rr.whole_second_after(moment) == datetime(2026, 11, 24, 2, 30, 1, tzinfo=timezone.utc)
	whole = datetime(2026, 11, 24, 2, 30, tzinfo=timezone.utc)
	assert rr.whole_second_after(whole) == whole
	# A retry's run_at keeps its milliseconds: at most 1 ms late, never early.
	assert rr.millisecond_after(moment) == datetime(2026, 11, 24, 2, 30, 0, 1000, tzinfo=timezone.utc)
	assert rr.millisecond_after(datetime(2026, 11, 24, 2, 30, 0, 250_000, tzinfo=timezone.utc)).microsecond == 250_000
	assert rr.millisecond_after(whole) == whole


def test_a_request_row_is_a_once_schedule_at_its_run_at_without_a_concurrency_limit():
	row = rr.RequestRow.of(
		{"name": "RR-1", "run_at_utc": "2026-11-24T02:30:05Z", "task": "BTU-1", "task_max_concurrent_runs": 3}
	)
	columns = row.spec_columns()
	assert (row.name, columns["run_frequency"], row.max_concurrent_runs) == ("run-request:RR-1", "Once", 0)
	spec = ScheduleSpec.from_row(columns, system_time_zone="Asia/Kolkata")
	assert spec.kind == "once" and spec.at == int(datetime(2026, 11, 24, 2, 30, 5, tzinfo=timezone.utc).timestamp())
	assert spec.catch_up_policy == "fire_once" and spec.catch_up_window.total_seconds() == rr.CATCH_UP_WINDOW_SECS


def test_an_enqueue_job_id_is_scoped_to_its_functions_app_and_each_generation_is_a_new_request():
	"""Issue 32: a job_id was one name across apps and for ever. Two apps' same id are two keys; a key's next generation
	(asked once the pending one ran) is a new request name, and the same generation asked twice is one."""
	mine, theirs = (
		rr.job_key("myapp.billing.send_reminder", "reminder-1"),
		rr.job_key("otherapp.mail.send", "reminder-1"),
	)
	assert (mine, theirs) == ("myapp:reminder-1", "otherapp:reminder-1")
	assert rr.job_key("myapp.other.function", "reminder-1") == mine, "one scope per app, whichever of its functions"
	assert rr.enqueue_request_name(mine, 1) == rr.enqueue_request_name(mine, 1)
	names = {rr.enqueue_request_name(mine, 1), rr.enqueue_request_name(mine, 2), rr.enqueue_request_name(theirs, 1)}
	assert len(names) == 3 and all(name.startswith("RR-") for name in names)
	assert rr.enqueue_request_name() != rr.enqueue_request_name(), "no job_id: a new request each time"


@pytest.mark.parametrize(
	("depth", "started", "wanted", "allowed"),
	[
		(0, 0, 3, 3),
		(rr.MAX_CHAIN_DEPTH - 1, 0, 3, 3),
		# At the deepest link a run starts nothing, however few its chain started: a cycle stops there.
		(rr.MAX_CHAIN_DEPTH, 0, 1, 0),
		(rr.MAX_CHAIN_DEPTH + 5, 0, 1, 0),
		# A fan-out stops at MAX_CHAIN_RUNS for the root run, counted across every depth.
		(3, rr.MAX_CHAIN_RUNS - 2, 5, 2),
		(3, rr.MAX_CHAIN_RUNS, 5, 0),
		(3, rr.MAX_CHAIN_RUNS + 7, 5, 0),
	],
)
def test_a_chained_run_starts_no_more_than_its_depth_and_its_root_runs_allow(depth, started, wanted, allowed):
	assert rr.chained_runs_allowed(depth, started, wanted) == allowed


def test_the_chain_bounds_stop_a_doubling_fan_out_far_below_its_size():
	"""25 Tasks each chained to every later one: one run of the first would start 2^23 runs of the last. Bounded, every
	run of the chain together is at most MAX_CHAIN_RUNS, each at most MAX_CHAIN_DEPTH links from the root."""
	tasks = 25
	started, frontier, deepest = 0, [(0, 0)], 0
	while frontier:
		task, depth = frontier.pop(0)
		children = list(range(task + 1, tasks))
		allowed = rr.chained_runs_allowed(depth, started, len(children))
		started += allowed
		frontier += [(child, depth + 1) for child in children[:allowed]]
		deepest = max(deepest, depth)
	assert started == rr.MAX_CHAIN_RUNS and deepest <= rr.MAX_CHAIN_DEPTH
