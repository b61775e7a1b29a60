"""A schedule row compiled: its spec, its job template and where its cursor starts, from the row alone (joined with
its task) and the bench's queues and declared functions. No Redis and no database: the reconcile reads the rows
(`site_rows.py`) and writes what this returns (`compiled_sites.py`).
"""

from __future__ import annotations

from datetime import datetime, timezone

from btu.scheduler_daemon.reads.bench import Bench, Site
from btu.scheduler_daemon.store.jobs import JobTemplate
from btu.scheduler_daemon.store.state import CompiledSchedule
from btu.shared.declared import ALLOW_TESTS, NotRunnable, config_flag
from btu.shared.instants import FRAPPE_DEFAULT_ZONE, from_ms, parse_iso, to_ms
from btu.shared.job_contract import RQ_EXECUTOR
from btu.shared.keys import MAX_CONCURRENT_RUNS
from btu.shared.run_kind import RunKind
from btu.shared.schedule import ScheduleError, ScheduleSpec
from btu.shared.schedule.row import row_instant
from btu.shared.task_args import ArgumentsError, parse_arguments


class RowError(Exception):
	"""A schedule row that cannot be scheduled; the message names the field and the fix."""


def compile_row(
	row: dict, bench: Bench, executor: str, system_time_zone: str | None, site: Site
) -> tuple[ScheduleSpec, JobTemplate]:
	"""A schedule row (joined with its task) as a spec and a job template; `site` (its config) decides, for the
	frappe executor, whether the site's own escape hatch lets an undeclared function of an installed app fire."""
	if not str(row["name"]).isprintable():
		# Tabs and newlines separate the fields of the scheduler's own Redis entries.
		raise RowError(f"name {row['name']!r} holds control characters (tab, newline, ...); rename the schedule")
	if not row.get("task_name"):
		raise RowError(f"task {row.get('task')!r}: no BTU Task has that name; pick an existing task")
	spec = ScheduleSpec.from_row(row, system_time_zone=system_time_zone)
	queue_type = (row.get("queue_name") or row.get("task_queue_name") or "default").strip()
	timeouts = bench.queue_timeouts
	if queue_type not in timeouts:
		owner = "" if (row.get("queue_name") or "").strip() else f"task {row['task']}: "
		raise RowError(
			f"{owner}queue_name {queue_type!r}: not a queue of this bench; use one of {', '.join(timeouts)} "
			"(custom queues come from the workers key of common_site_config.json)"
		)
	max_concurrent = concurrency_limit(row)
	arguments = parse_json_object("arguments", row.get("task_arguments"), f"task {row['task']}")
	overrides = parse_json_object("argument_overrides", row.get("argument_overrides"), f"schedule {row['name']}")
	template = JobTemplate(
		executor=executor,
		queue=bench.queue_name(queue_type),
		timeout=int(row.get("task_max_task_duration") or 0) or timeouts[queue_type],
		task=row["task"],
		description=row.get("task_desc_short") or row["task"],
		function=(row.get("task_function_string") or "") if executor == RQ_EXECUTOR else "",
		kwargs={**arguments, **overrides} if executor == RQ_EXECUTOR else {},
		max_concurrent=max_concurrent,
	)
	if executor == RQ_EXECUTOR and not template.function:
		raise RowError(f"task {row['task']}: function_string is empty; give the dotted path of a function")
	function = (row.get("task_function_string") or "").strip()
	if function:
		# Never fired: rq's jobs would call it with no task runner to refuse it, the task runner would only fail
		# each run (a site upgraded from the original BTU, which ran any callable, may hold many such Tasks).
		try:
			bench.app_files_for(site, executor).check(function, allow_tests=config_flag(site.config.get(ALLOW_TESTS)))
		except NotRunnable as exc:
			raise RowError(f"task {row['task']}: {exc}") from None
	return spec, template


def concurrency_limit(row: dict) -> int:
	"""The task's max_concurrent_runs (0: no limit); a RowError for one release.lua cannot apply."""
	value = row.get("task_max_concurrent_runs") or 0
	if not isinstance(value, int) or not 0 <= value <= MAX_CONCURRENT_RUNS:
		raise RowError(
			f"task {row['task']}: max_concurrent_runs {value!r}: "
			f"give a whole number from 0 (no limit) to {MAX_CONCURRENT_RUNS}"
		)
	if value and not str(row["task"]).isprintable():
		# Tabs separate the fields of the prepared members that carry it.
		raise RowError(
			f"task {row['task']!r}: its name holds control characters (tab, newline, ...), "
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
	row: dict,
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
		name=row["name"],
		fingerprint=spec.fingerprint,
		spec=spec.stored(),
		job=template.stored(),
		paused=bool(int(row.get("paused") or 0)),
		active=active,
		cursor_if_new=cursor_text(cursor_if_new),
		fire_at_if_new=fire_at_text(spec, cursor_if_new),
		cursor_if_changed=cursor_text(cursor_if_changed),
		fire_at_if_changed=fire_at_text(spec, cursor_if_changed),
		modified=str(row.get("modified")),
	)


def cursor_text(slot: datetime | None) -> str:
	"""A slot as the state keeps it: ms since the epoch, "" for none."""
	return str(to_ms(slot)) if slot is not None else ""


def fire_at_text(spec: ScheduleSpec, slot: datetime | None) -> str:
	"""When the slot fires (jitter added) as ms since the epoch, "0" for no slot."""
	return str(to_ms(spec.fire_time(slot))) if slot is not None else "0"


def first_cursors(
	row: dict, spec: ScheduleSpec, logged_slot: str | None, system_tz: str | None, now: datetime
) -> tuple[datetime | None, datetime | None]:
	"""Where a compiled row's cursor starts: (if new to the state, if changed)."""
	if row["kind"] is RunKind.RUN_REQUEST:
		# A run request fires at its run_at however late it is found (within its catch-up window),
		# and never after its Log is written (it is no longer pending then).
		return from_ms(spec.at * 1000), from_ms(spec.at * 1000)
	if row["kind"] is RunKind.FRAPPE_JOB:
		# Frappe's next run is its cron's first moment after last_execution; one missed fires once now.
		last = row_moment(row.get("last_execution"), system_tz) or now
		return spec.next_slot(min(last, now)), spec.next_slot(now)
	from_now = spec.next_slot(now)
	resume = resume_after(logged_slot, row.get("modified"), system_tz, now)
	return (from_now if resume == now else spec.next_slot(resume)), from_now


def resume_after(logged_slot: str | None, modified, system_tz: str | None, now: datetime) -> datetime:
	"""Where a schedule new to the state starts: after its newest logged slot, or its row's last change when
	that is later (it was disabled or paused until then: no catch-up for time it was off), else now."""
	logged = parse_logged_slot(logged_slot)
	if logged is None:
		return now
	changed = row_moment(modified, system_tz)
	return min(max(logged, changed), now) if changed else logged


def row_moment(value, system_tz: str | None) -> datetime | None:
	"""A Datetime column (naive in the site's zone, as Frappe stores it) as an aware UTC instant; None if unreadable."""
	try:
		at = row_instant("modified", value, (system_tz or "").strip() or FRAPPE_DEFAULT_ZONE)
	except ScheduleError:
		return None
	return None if at is None else datetime.fromtimestamp(at, timezone.utc)


def parse_logged_slot(text: str | None) -> datetime | None:
	"""A Log's slot_utc as an aware UTC instant (naive text is UTC, as the column's name says); None if unreadable."""
	if not text:
		return None
	try:
		value = parse_iso(text, "slot_utc")
	except ValueError:
		return None
	return value.astimezone(timezone.utc) if value.tzinfo else value.replace(tzinfo=timezone.utc)
