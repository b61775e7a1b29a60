"""Run request arithmetic shared by both sides: names, retry delays, whole-second run_at, the Once row."""

from __future__ import annotations

from datetime import datetime, timezone

import pytest

from btu.shared import run_requests as rr
from btu.shared.schedule import ScheduleSpec

pytestmark = pytest.mark.versions


def test_names_are_one_per_run_and_never_collide_across_kinds():
	slot = datetime(2026, 11, 24, 2, 30, tzinfo=timezone.utc)
	assert rr.slot_request_name("TS-1", slot, 2) == rr.slot_request_name("TS-1", slot, 2)
	names = {
		rr.slot_request_name("TS-1", slot, 1), rr.slot_request_name("TS-1", slot, 2), rr.slot_request_name("TS-2", slot, 2),
		rr.chain_request_name("LOG-1", "BTU-1"), rr.chain_request_name("LOG-1", "BTU-1", 2), rr.chain_request_name("LOG-1", "BTU-2"),
		# Look-alikes: a separator inside a name must not make two keys one.
		rr.request_name("a|b", "c"), rr.request_name("a", "b|c"),
	}
	assert len(names) == 8
	assert all(len(name) <= 140 and name.startswith("RR-") for name in names)
	assert rr.request_of(rr.state_name("RR-x")) == "RR-x" and rr.is_state_name("run-request:RR-x") and not rr.is_state_name("TS-run-request:")


@pytest.mark.parametrize(
	("attempt", "initial", "factor", "maximum", "expected"),
	[
		(2, 60, 2, 3600, 60), (3, 60, 2, 3600, 120), (4, 60, 2, 3600, 240), (9, 60, 2, 3600, 3600), (3, 10, 1, 0, 10),
		# No cap, or one above it: at most MAX_RETRY_DELAY_SECS, also where the power overflows a float.
		(100, 60, 10, 0, rr.MAX_RETRY_DELAY_SECS), (400, 60, 10, 0, rr.MAX_RETRY_DELAY_SECS), (3, 60, 2, 10**12, 120),
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
	row = rr.as_schedule_row({"name": "RR-1", "run_at_utc": "2026-11-24T02:30:05Z", "task": "BTU-1", "task_max_concurrent_runs": 3})
	assert (row["name"], row["run_frequency"], row["task_max_concurrent_runs"]) == ("run-request:RR-1", "Once", 0)
	spec = ScheduleSpec.from_row(row, system_time_zone="Asia/Kolkata")
	assert spec.kind == "once" and spec.at == int(datetime(2026, 11, 24, 2, 30, 5, tzinfo=timezone.utc).timestamp())
	assert spec.catch_up_policy == "fire_once" and spec.catch_up_window.total_seconds() == rr.CATCH_UP_WINDOW_SECS
