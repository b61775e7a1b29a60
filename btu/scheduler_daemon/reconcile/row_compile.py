"""A run's row compiled: its spec, its job template and where its cursor starts, from the row alone (its source's
typed row, `btu.shared.run_row.RunRow`) and the bench's queues and declared functions. No Redis and no database: the
reconcile reads the rows (`site_rows.py`) and writes what this returns (`site_compiler.py`).
"""

from __future__ import annotations

from datetime import datetime

from btu.scheduler_daemon.reads.bench import Bench, Site
from btu.scheduler_daemon.store.jobs import JobTemplate
from btu.scheduler_daemon.store.state import CompiledSchedule
from btu.shared.declared import ALLOW_TESTS, NotRunnable, config_flag
from btu.shared.instants import to_ms
from btu.shared.job_contract import RQ_EXECUTOR
from btu.shared.keys import MAX_CONCURRENT_RUNS
from btu.shared.run_kind import RunKind
from btu.shared.run_row import RunRow
from btu.shared.schedule import ScheduleError, ScheduleSpec
from btu.shared.task_args import ArgumentsError, parse_arguments


class RowError(Exception):
	"""A schedule row that cannot be scheduled; the message names the field and the fix."""


def compile_row(
	row: RunRow, bench: Bench, executor: str, system_time_zone: str | None, site: Site
) -> tuple[ScheduleSpec, JobTemplate]:
	"""A run's row as a spec and a job template; `site` (its config) decides, for the frappe executor, whether the
	site's own escape hatch lets an undeclared function of an installed app fire."""
	if not str(row.name).isprintable():
		# Tabs and newlines separate the fields of the scheduler's own Redis entries.
		raise RowError(f"name {row.name!r} holds control characters (tab, newline, ...); rename the schedule")
	if not row.task_name:
		raise RowError(f"task {row.task!r}: no BTU Task has that name; pick an existing task")
	spec = ScheduleSpec.from_row(row.spec_columns(), system_time_zone=system_time_zone)
	queue_type = (row.queue_name or row.task_queue_name or "default").strip()
	timeouts = bench.queue_timeouts
	if queue_type not in timeouts:
		owner = "" if (row.queue_name or "").strip() else f"task {row.task}: "
		raise RowError(
			f"{owner}queue_name {queue_type!r}: not a queue of this bench; use one of {', '.join(timeouts)} "
			"(custom queues come from the workers key of common_site_config.json)"
		)
	max_concurrent = concurrency_limit(row)
	arguments = parse_json_object("arguments", row.arguments, f"task {row.task}")
	overrides = parse_json_object("argument_overrides", row.argument_overrides, f"schedule {row.name}")
	template = JobTemplate(
		executor=executor,
		queue=bench.queue_name(queue_type),
		timeout=int(row.max_task_duration or 0) or timeouts[queue_type],
		task=row.task,
		description=row.description or row.task,
		function=(row.function or "") if executor == RQ_EXECUTOR else "",
		kwargs={**arguments, **overrides} if executor == RQ_EXECUTOR else {},
		max_concurrent=max_concurrent,
	)
	if executor == RQ_EXECUTOR and not template.function:
		raise RowError(f"task {row.task}: function_string is empty; give the dotted path of a function")
	function = (row.function or "").strip()
	if function:
		# Never fired: rq's jobs would call it with no task runner to refuse it, the task runner would only fail
		# each run (a site upgraded from the original BTU, which ran any callable, may hold many such Tasks).
		try:
			bench.app_files_for(site, executor).check(function, allow_tests=config_flag(site.config.get(ALLOW_TESTS)))
		except NotRunnable as exc:
			raise RowError(f"task {row.task}: {exc}") from None
	return spec, template


def concurrency_limit(row: RunRow) -> int:
	"""The task's max_concurrent_runs (0: no limit); a RowError for one release.lua cannot apply."""
	value = row.max_concurrent_runs or 0
	if not isinstance(value, int) or not 0 <= value <= MAX_CONCURRENT_RUNS:
		raise RowError(
			f"task {row.task}: max_concurrent_runs {value!r}: "
			f"give a whole number from 0 (no limit) to {MAX_CONCURRENT_RUNS}"
		)
	if value and not str(row.task).isprintable():
		# Tabs separate the fields of the prepared members that carry it.
		raise RowError(
			f"task {row.task!r}: its name holds control characters (tab, newline, ...), "
			"so its concurrency limit cannot apply; rename the task"
		)
	return value


def parse_json_object(field: str, text, owner: str) -> dict:
	"""The JSON object of keyword arguments in `text` (empty means {}); a RowError names `owner` and `field`."""
	try:
		return parse_arguments(text, field)
	except ArgumentsError as exc:
		raise RowError(f"{owner}: {exc}") from None


def row_problem(exc: Exception) -> str:
	"""Why a row cannot be scheduled, as its site's invalid rows list it: a schedule's or row's own error as it reads,
	anything else named with its class."""
	if isinstance(exc, (ScheduleError, RowError)):
		return str(exc)
	return f"cannot be scheduled: {type(exc).__name__}: {exc}"


def compiled(
	row: RunRow,
	spec: ScheduleSpec,
	template: JobTemplate,
	cursor_if_new: datetime | None,
	cursor_if_changed: datetime | None,
	*,
	active: bool,
) -> CompiledSchedule:
	"""What the state is to hold of a compiled row; `cursor_if_new` is its next slot if new to the state,
	`cursor_if_changed` from now."""
	return CompiledSchedule(
		name=row.name,
		fingerprint=spec.fingerprint,
		spec=spec.stored(),
		job=template.stored(),
		paused=bool(int(row.paused or 0)),
		active=active,
		cursor_if_new=cursor_text(cursor_if_new),
		fire_at_if_new=fire_at_text(spec, cursor_if_new),
		cursor_if_changed=cursor_text(cursor_if_changed),
		fire_at_if_changed=fire_at_text(spec, cursor_if_changed),
		modified=str(row.modified),
	)


def cursor_text(slot: datetime | None) -> str:
	"""A slot as the state keeps it: ms since the epoch, "" for none."""
	return str(to_ms(slot)) if slot is not None else ""


def fire_at_text(spec: ScheduleSpec, slot: datetime | None) -> str:
	"""When the slot fires (jitter added) as ms since the epoch, "0" for no slot."""
	return str(to_ms(spec.fire_time(slot))) if slot is not None else "0"
