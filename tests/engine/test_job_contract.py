"""The task runner takes what the scheduler's frappe jobs send it (`btu.shared.job_contract`).

Read from the runner's source with `ast`: tier 1 has no frappe to import it with."""

from __future__ import annotations

import ast
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest

from btu.shared import job_contract
from btu.shared.run_kind import RunKey, RunKind

pytestmark = pytest.mark.versions

REPO = Path(__file__).resolve().parents[2]


def runner_parameters() -> tuple[list[str], int]:
	"""The parameter names of the function TASK_RUNNER names, and how many of them have no default."""
	module, _, name = job_contract.TASK_RUNNER.rpartition(".")
	tree = ast.parse((REPO / (module.replace(".", "/") + ".py")).read_text())
	[function] = [node for node in tree.body if isinstance(node, ast.FunctionDef) and node.name == name]
	arguments = function.args
	assert not (arguments.posonlyargs or arguments.kwonlyargs or arguments.vararg or arguments.kwarg)
	names = [argument.arg for argument in arguments.args]
	return names, len(names) - len(arguments.defaults)


def test_runner_takes_exactly_the_contract_kwargs():
	names, _ = runner_parameters()
	assert tuple(names) == job_contract.RUNNER_KWARGS


def test_scheduler_sends_every_required_kwarg_and_no_other():
	names, required = runner_parameters()
	slot = datetime(2026, 3, 29, 1, 30, tzinfo=timezone.utc)
	sent = job_contract.runner_kwargs(
		"TASK-0001", RunKey(RunKind.SCHEDULE, "TS-000042"), slot, slot + timedelta(milliseconds=1500)
	)
	assert set(names[:required]) <= set(sent) <= set(names)
	assert sent["slot"] == "2026-03-29T01:30:00Z" and sent["fire_at"] == "2026-03-29T01:30:01.500Z"
