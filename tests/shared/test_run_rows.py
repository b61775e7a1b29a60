"""Each source's typed row (`btu.shared.run_row.RunRow`) and the compile step that reads it: immutable, as SQL returned
it, its kind's behaviour its own (its spec's columns, where its cursor starts, whether it resumes after its Logs)."""

from __future__ import annotations

import dataclasses
import types
from datetime import datetime, timezone

import pytest

from btu.scheduler_daemon.reads.sources.schedules import ScheduleRow
from btu.scheduler_daemon.reconcile.row_compile import RowError, compile_row
from btu.shared.run_requests import ENQUEUE, RequestRow
from btu.shared.schedule import ScheduleSpec
from btu.shared.scheduled_jobs import JobTypeRow

# Slotted frozen dataclasses, inherited: Python's own, so the Python 3.14 leg runs these too.
pytestmark = pytest.mark.versions

UTC = timezone.utc
NOW = datetime(2026, 6, 1, 12, 0, tzinfo=UTC)


class Bench:
	"""The bench as the compile step asks it: its queues and its declared functions (all of them here)."""

	queue_timeouts = {"short": 300, "default": 300, "long": 1500}

	def queue_name(self, queue_type: str) -> str:
		return f"bench:{queue_type}"

	def app_files_for(self, site, executor):
		return types.SimpleNamespace(check=lambda function, allow_tests: None)


SITE = types.SimpleNamespace(name="site1", config={})
TASK = {"task": "T-1", "task_name": "T-1", "task_function_string": "myapp.tasks.run", "task_arguments": None,
	"task_queue_name": None, "task_max_task_duration": None, "task_desc_short": "run",
	"task_max_concurrent_runs": 0}  # fmt: skip


def schedule_row(**columns) -> ScheduleRow:
	return ScheduleRow.of(
		{
			"name": "TS-1",
			"run_frequency": "Daily",
			"hour": 9,
			"minute": 0,
			"paused": 0,
			"queue_name": None,
			"argument_overrides": None,
			"modified": datetime(2026, 5, 1),
			**TASK,
			**columns,
		}  # fmt: skip
	)


def request_row(**columns) -> RequestRow:
	return RequestRow.of({"name": "RR-1", "run_at_utc": "2026-06-01T09:00:00.250Z", **TASK, **columns})


def job_type_row(**columns) -> JobTypeRow:
	return JobTypeRow.of({"name": "app.daily", "method": "app.tasks.daily", "frequency": "Daily", **columns}, None)


def cursors(row, logged_slot=None):
	spec = ScheduleSpec.from_row(row.spec_columns(), system_time_zone="UTC")
	return row.first_cursors(spec, logged_slot, "UTC", NOW)


def test_rows_are_immutable():
	for row in (schedule_row(), request_row(), job_type_row()):
		with pytest.raises(dataclasses.FrozenInstanceError):
			row.task = "T-2"
	with pytest.raises(TypeError):
		schedule_row().columns["task"] = "T-2"


def test_only_a_schedule_resumes_after_its_logs_and_the_others_start_by_their_own_rule():
	assert [type(row).resumes_after_logs for row in (schedule_row(), request_row(), job_type_row())] == [
		True,
		False,
		False,
	]
	# A schedule new to the state resumes after its newest logged slot (the row changed before it).
	assert cursors(schedule_row(), "2026-05-30T09:00:00") == (
		datetime(2026, 5, 31, 9, tzinfo=UTC),
		datetime(2026, 6, 2, 9, tzinfo=UTC),
	)
	assert cursors(schedule_row()) == (datetime(2026, 6, 2, 9, tzinfo=UTC),) * 2
	# A request fires at its run_at however late it is found.
	assert cursors(request_row()) == (datetime(2026, 6, 1, 9, tzinfo=UTC),) * 2
	# A job type's missed run fires once: from its last_execution, on the site's zone.
	assert cursors(job_type_row(last_execution=datetime(2026, 5, 30, 12))) == (
		datetime(2026, 5, 31, tzinfo=UTC),
		datetime(2026, 6, 2, tzinfo=UTC),
	)


def test_an_enqueue_request_runs_its_own_function_on_its_own_queue():
	row = request_row(origin=ENQUEUE, method="myapp.jobs.send", kwargs='{"to": 1}', queue="long", timeout=60)
	assert (row.task, row.task_name, row.function, row.arguments, row.task_queue_name, row.max_task_duration) == (
		"myapp.jobs.send",
		"myapp.jobs.send",
		"myapp.jobs.send",
		'{"to": 1}',
		"long",
		60,
	)
	spec, template = compile_row(row, Bench(), "rq", None, SITE)
	assert (spec.at_ms, template.queue, template.timeout, template.kwargs) == (250, "bench:long", 60, {"to": 1})


@pytest.mark.parametrize(
	("columns", "words"),
	[
		({"name": "TS\t1"}, "holds control characters"),
		({"task_name": None}, "no BTU Task has that name"),
		({"task_queue_name": "nosuch"}, "task T-1: queue_name 'nosuch': not a queue of this bench"),
		({"task_max_concurrent_runs": "3"}, "max_concurrent_runs '3'"),
		({"task_max_concurrent_runs": 2, "task": "T\t1"}, "its name holds control characters"),
		({"task_arguments": "[1]"}, "task T-1: arguments"),
		({"argument_overrides": "{"}, "schedule TS-1: argument_overrides"),
	],
)
def test_a_row_takes_what_sql_returned_and_the_compile_step_refuses_a_bad_value(columns, words):
	with pytest.raises(RowError, match=words.replace("\t", "\\t")):
		compile_row(schedule_row(**columns), Bench(), "frappe", None, SITE)
