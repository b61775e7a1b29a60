"""State and jobs written by a BTU from before the run kind was a field: a scheduler on this code, restarted over
them, reads them as its own, losing and duplicating nothing.

That BTU named a run request's state "run-request:<name>" and a Scheduled Job Type's "frappe-job:<name>", and its
frappe jobs called the task runner with {task, schedule: the state's name, slot, fire_at}, without a kind. It is stood
in for by this code with its jobs' kwargs written that way (`older_runner_kwargs`); its state's names are checked
letter for letter against the old ones.
"""

from __future__ import annotations

from dataclasses import replace

import pytest
from rq.job import Job

from btu.scheduler_daemon.store import jobs
from btu.shared.instants import slot_text
from btu.shared.job_contract import run_of
from btu.shared.run_kind import RunKey, RunKind
from tests.engine.helpers import definition, queue_ids, queue_key, state_names
from tests.engine.test_prepare_release import next_instant, prepare_due, release, sleep_until_ms, state
from tests.engine.test_run_requests import at, insert_request
from tests.engine.test_scheduled_jobs import clear_of_boundary, frappe_leader, insert_job_type, site  # noqa: F401 (site: the fixture)

pytestmark = pytest.mark.versions


def older_runner_kwargs(task, run, slot, fire_at) -> dict:
	"""The task runner's kwargs as a BTU from before run kinds wrote them: the state's name, no kind."""
	return {"task": task, "schedule": run.format(), "slot": slot_text(slot), "fire_at": slot_text(fire_at)}


def test_a_scheduler_restarted_over_an_older_btus_state_fires_each_run_once(site, r, monkeypatch):  # noqa: F811 (site: the fixture imported above)
	bench, data = site
	site_name = data.site.name
	task = data.insert_task(function_string="tests.engine.tasks.record", desc_short="record")
	clear_of_boundary(60, before=10.0)  # the job type's next minute is not due while the test runs
	moment = next_instant()
	prepared, compiled = insert_request(data, task, at(moment)), insert_request(data, task, at(moment))
	insert_job_type(data, "every_minute", cron_format="* * * * *")

	# The older BTU compiled all three, prepared the first request's job, and stopped.
	monkeypatch.setattr(jobs, "runner_kwargs", older_runner_kwargs)
	older = frappe_leader(bench)
	old_names = {f"run-request:{prepared}", f"run-request:{compiled}", "frappe-job:every_minute"}
	assert old_names <= state_names(r, site_name)
	due = older.state.due(older.config.batch_size, older.firing.ahead_ms)
	assert {f"run-request:{prepared}", f"run-request:{compiled}"} <= {entry.schedule for entry in due.entries}
	assert not older.firing.prepare(
		replace(due, entries=[e for e in due.entries if e.schedule == f"run-request:{prepared}"])
	).fenced
	written = {name: (definition(r, site_name, name), state(r, site_name, name, "cursor")) for name in old_names}
	older.lease.release()
	monkeypatch.undo()

	# This code, started over that state: every state is its own as it stands; only the unprepared request is prepared.
	scheduler = frappe_leader(bench)
	assert {
		name: (definition(r, site_name, name), state(r, site_name, name, "cursor")) for name in old_names
	} == written
	assert [entry.schedule for entry in prepare_due(scheduler)] == [f"run-request:{compiled}"]
	sleep_until_ms(moment * 1000)
	assert release(scheduler) and release(scheduler)
	slot = at(moment)
	ids = {name: jobs.job_id(site_name, f"run-request:{name}", slot) for name in (prepared, compiled)}
	assert sorted(queue_ids(r, queue_key(bench))) == sorted(ids.values()), (
		"each request queued once, under its old job id"
	)
	sent = {name: Job.fetch(ids[name], connection=r).kwargs["kwargs"] for name in ids}
	assert "kind" not in sent[prepared] and sent[compiled]["kind"] == RunKind.RUN_REQUEST.value
	for name, kwargs in sent.items():
		assert kwargs["schedule"] == f"run-request:{name}"
		assert run_of(kwargs["schedule"], kwargs.get("kind")) == RunKey(RunKind.RUN_REQUEST, name), (
			"the runner runs the request"
		)

	# Nothing more on a later pass.
	scheduler.reconciler.full()
	assert prepare_due(scheduler) == [] and release(scheduler)
	assert sorted(queue_ids(r, queue_key(bench))) == sorted(ids.values())
