"""btu.shared.run_kind: a run's kind is a field; its key's text, the name Redis and the job ids know it by, is written
and read back in that one module, as BTU wrote it before the kind was a field."""

from __future__ import annotations

from datetime import datetime, timezone

import pytest

from btu.shared.job_contract import run_of, runner_kwargs
from btu.shared.run_kind import RESERVED_STARTS, RunKey, RunKind

SLOT = datetime(2026, 3, 29, 1, 30, tzinfo=timezone.utc)


@pytest.mark.parametrize(
	("run", "text"),
	[
		(RunKey(RunKind.SCHEDULE, "TS-000042"), "TS-000042"),
		(RunKey(RunKind.RUN_REQUEST, "RR-1"), "run-request:RR-1"),
		(RunKey(RunKind.FRAPPE_JOB, "app.tasks.daily"), "frappe-job:app.tasks.daily"),
		(RunKey(RunKind.SCHEDULE, "TS-run-request:1"), "TS-run-request:1"),
	],
)
def test_a_keys_text_is_the_older_state_name_and_reads_back(run, text):
	assert run.format() == text and RunKey.parse(text) == run and run.reads_back()
	assert RunKey.of(run.kind, text) == run


def test_a_schedule_named_like_another_kinds_key_does_not_read_back():
	assert RESERVED_STARTS == ("run-request:", "frappe-job:")
	for start in RESERVED_STARTS:
		assert not RunKey(RunKind.SCHEDULE, f"{start}x").reads_back()
		with pytest.raises(ValueError):
			RunKey.of(RunKind.SCHEDULE, f"{start}x")
	with pytest.raises(ValueError):
		RunKey.of(RunKind.RUN_REQUEST, "TS-000042")


def test_a_job_names_its_run_by_kind_and_a_job_without_one_by_its_text():
	for run in (
		RunKey(RunKind.SCHEDULE, "TS-1"),
		RunKey(RunKind.RUN_REQUEST, "RR-1"),
		RunKey(RunKind.FRAPPE_JOB, "a.b"),
	):
		sent = runner_kwargs("T", run, SLOT, SLOT)
		assert ("kind" in sent) == (run.kind is not RunKind.SCHEDULE)
		assert run_of(sent["schedule"], sent.get("kind")) == run
		# As a BTU from before run kinds queued it: the key's text alone.
		assert run_of(run.format(), None) == run
	with pytest.raises(ValueError):
		run_of("TS-1", RunKind.RUN_REQUEST.value)
