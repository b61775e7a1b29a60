"""The planner, driven with plain values: no Redis, no scheduler, no clock."""

from __future__ import annotations

import json
from datetime import datetime, timedelta, timezone

import pytest
import redis

from btu.scheduler_daemon.leading.planner import Planner
from btu.scheduler_daemon.store.fires import DueEntry
from btu.scheduler_daemon.store.jobs import JobShape, JobTemplate, job_id
from btu.shared.instants import to_ms
from btu.shared.schedule import ScheduleSpec

pytestmark = pytest.mark.versions

SITE = "site1.localhost"
TEN = datetime(2026, 3, 29, 10, 0, tzinfo=timezone.utc)
GRACE, AHEAD = timedelta(seconds=10), timedelta(seconds=2)
TEMPLATE = JobTemplate(
	executor="frappe", queue="bench-x:default", timeout=300, task="TASK-0001", description="invoices"
)
EVERY_MINUTE = ScheduleSpec(name="TS-1", zone_name="UTC", kind="cron", cron="* * * * *")


def planner() -> Planner:
	connection = redis.Redis(port=1)  # rq's Job wants one; nothing is ever sent
	return Planner(lambda job_json, site: JobShape(connection, JobTemplate.from_dict(json.loads(job_json)), site))


def state(spec: ScheduleSpec, cursor: datetime | str, runs: int | str = 0) -> dict:
	return {
		"cursor": cursor if isinstance(cursor, str) else str(to_ms(cursor)),
		"runs": str(runs),
		"fingerprint": spec.fingerprint,
		"spec": json.dumps(spec.to_dict()),
		"job": json.dumps(TEMPLATE.to_dict()),
	}


def plan(*states: tuple[str, dict | Exception], now: datetime = TEN + timedelta(milliseconds=500), shapes=None):
	due = [DueEntry(SITE, name, 0) for name, _ in states]
	return (shapes or planner()).plan(now, due, [s for _, s in states], grace=GRACE, ahead=AHEAD)


def test_a_due_slot_becomes_one_job_and_the_cursor_moves_to_the_next():
	result = plan(("TS-1", state(EVERY_MINUTE, TEN)))
	[item] = result.items
	assert (item.site, item.schedule, item.expected_cursor) == (SITE, "TS-1", str(to_ms(TEN)))
	assert [(job.slot_ms, job.job_id) for job in item.jobs] == [(to_ms(TEN), job_id(SITE, "TS-1", TEN))]
	assert item.next_cursor == str(to_ms(TEN + timedelta(minutes=1)))
	assert (item.skipped, item.expired, item.overlap_skip) == (0, 0, False)
	assert not (result.gone or result.corrupt or result.failed)


def test_a_slot_beyond_the_prepare_window_is_not_planned():
	[item] = plan(("TS-1", state(EVERY_MINUTE, TEN + timedelta(minutes=1)))).items
	assert item.jobs == [] or all(job.slot_ms <= to_ms(TEN + AHEAD + timedelta(milliseconds=500)) for job in item.jobs)


def test_missed_slots_follow_the_catch_up_policy():
	spec = ScheduleSpec(name="TS-1", zone_name="UTC", kind="cron", cron="* * * * *", catch_up_policy="skip")
	[item] = plan(("TS-1", state(spec, TEN - timedelta(hours=1)))).items
	assert [job.slot_ms for job in item.jobs] == [to_ms(TEN)], "only the slot within the grace fires"
	assert item.skipped + item.expired == 60


def test_a_schedule_at_its_run_limit_finishes():
	once = ScheduleSpec(name="TS-1", zone_name="UTC", kind="once", at=to_ms(TEN) // 1000)
	[item] = plan(("TS-1", state(once, TEN))).items
	assert len(item.jobs) == 1
	assert (item.next_cursor, item.next_fire_at) == ("", "0")


def test_a_state_removed_meanwhile_is_gone_not_corrupt():
	result = plan(("TS-1", {"cursor": None, "spec": None, "runs": None}))
	assert [entry.schedule for entry in result.gone] == ["TS-1"]
	assert not (result.items or result.corrupt)


def test_wrong_values_in_a_state_are_named_and_cost_only_that_schedule():
	good = state(EVERY_MINUTE, TEN)
	result = plan(
		("text-cursor", state(EVERY_MINUTE, "abc")),
		("text-runs", state(EVERY_MINUTE, TEN, runs="many")),
		("huge-cursor", state(EVERY_MINUTE, "9" * 30)),
		("junk-spec", {**good, "spec": "{not json"}),
		("spec-of-another-shape", {**good, "spec": json.dumps({"kind": "cron"})}),
		("junk-job", {**good, "job": json.dumps({"executor": "frappe"})}),
		("wrong-type", ValueError("WRONGTYPE Operation against a key holding the wrong kind of value")),
		("good", good),
	)
	reasons = {bad.schedule: bad.reason for bad in result.corrupt}
	assert set(reasons) == {
		"text-cursor",
		"text-runs",
		"huge-cursor",
		"junk-spec",
		"spec-of-another-shape",
		"junk-job",
		"wrong-type",
	}
	assert "cursor 'abc'" in reasons["text-cursor"] and "runs 'many'" in reasons["text-runs"]
	assert "out of range" in reasons["huge-cursor"]
	assert reasons["junk-spec"].startswith("spec or job is not what the reconcile writes")
	assert reasons["wrong-type"].startswith("WRONGTYPE")
	assert [item.schedule for item in result.items] == ["good"]


def test_a_schedule_that_raises_while_planned_fails_alone():
	class Exploding(JobShape):
		def fire_fields(self, schedule, slot, fire_at):
			if schedule == "boom":
				raise RuntimeError("cannot pickle")
			return super().fire_fields(schedule, slot, fire_at)

	connection = redis.Redis(port=1)
	shapes = Planner(lambda job_json, site: Exploding(connection, JobTemplate.from_dict(json.loads(job_json)), site))
	result = plan(("boom", state(EVERY_MINUTE, TEN)), ("fine", state(EVERY_MINUTE, TEN)), shapes=shapes)
	[failed] = result.failed
	assert (failed.schedule, failed.reason) == ("boom", "cannot be fired: RuntimeError: cannot pickle")
	assert isinstance(failed.error, RuntimeError)
	assert [item.schedule for item in result.items] == ["fine"]
