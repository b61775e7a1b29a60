"""After the DocTypes sync: the original's Tasks, Schedules and Logs as this BTU's, in place, names and links kept.

Only the original's rows are touched: a Task it submitted or cancelled (this BTU's Task is not submittable),
arguments that are Python literals, a Schedule whose table still has the original's `redis_job_id` column and
whose `time_zone` (a column the original never had) is empty and that no app declares, a Log with no `status`
beside its `success_fail`. Each converted row gets a value there, so running this again finds nothing to do.
"""

from __future__ import annotations

from datetime import datetime, timezone

import frappe

from btu.btu_core.runs.task_inputs import TaskInputError, check_queue
from btu.btu_core.upgrade import notes
from btu.btu_core.upgrade.convert import moments
from btu.btu_core.upgrade.convert.arguments import LiteralError, to_json
from btu.btu_core.upgrade.convert.schedules import convert as convert_schedule
from btu.btu_core.upgrade.convert.statuses import LOG_STATUS, UNKNOWN_STATUS
from btu.btu_core.upgrade.tables import Tables

TASK, SCHEDULE, LOG = "BTU Task", "BTU Task Schedule", "BTU Task Log"
# A column only the original's BTU Task Schedule has: its table was the original's.
ORIGINAL_SCHEDULE_COLUMN = "redis_job_id"
# Only the v15.2 schema's schedule has it: its cron is local time in that zone.
LOCAL_SCHEMA_COLUMN = "cron_timezone"
SCHEDULE_COLUMNS = (
	"name",
	"run_frequency",
	"cron_string",
	"hour",
	"minute",
	"day_of_week",
	"day_of_month",
	"month",
	"argument_overrides",
)


def convert(
	tables: Tables, *, config_zone: str | None, system_zone: str, bad_hours: set[str] = frozenset()
) -> list[dict]:
	"""Convert the original's rows in `tables`; the notes of what could not be. `config_zone`: the original BTU
	Configuration's `cron_time_zone`; `bad_hours`: the schedules whose hour `hours` could not read."""
	found = tasks(tables)
	found += schedules(tables, config_zone=config_zone, system_zone=system_zone, bad_hours=bad_hours)
	found += logs(tables)
	return found


def tasks(tables: Tables) -> list[dict]:
	found = []
	columns = tables.columns(tables.task)
	transient = "is_transient" in columns
	# Only a submittable DocType has it: the table was the original's, whose Link to BTU Queue is now a queue's name.
	original = "amended_from" in columns
	fields = "name, docstatus, arguments, queue_name, task_type" + (", is_transient" if transient else ", 0")
	for name, docstatus, arguments, queue_name, task_type, is_transient in frappe.db.sql(
		f"select {fields} from `{tables.task}`"
	):
		values = {}
		if docstatus:
			values["docstatus"] = 0
			if docstatus == 2:
				found.append(
					notes.note(
						TASK,
						name,
						"docstatus",
						"Cancelled",
						"was cancelled in the original BTU; BTU Tasks are not submitted or cancelled, so it is a Task "
						"like the others and its schedules keep their Enabled: disable or delete them if it is retired",
					)
				)
		# The original's v15 marked its transient (Subtask) Tasks with a Check; the sync gave every row the default.
		if is_transient and task_type in (None, "", "Persistent"):
			values["task_type"] = "Subtask"
		elif not task_type:
			values["task_type"] = "Persistent"
		found += _json(TASK, name, "arguments", arguments, values)
		if original:
			try:
				check_queue(queue_name)
			except TaskInputError as exc:
				found.append(
					notes.note(
						TASK,
						name,
						"queue_name",
						queue_name,
						str(exc).removeprefix(f"queue_name '{queue_name or ''}': "),
					)
				)
		_update(tables.task, name, values)
	return found


def schedules(tables: Tables, *, config_zone: str | None, system_zone: str, bad_hours: set[str]) -> list[dict]:
	columns = tables.columns(tables.schedule)
	if ORIGINAL_SCHEDULE_COLUMN not in columns:
		return []
	local_schema = LOCAL_SCHEMA_COLUMN in columns
	fields = ", ".join(SCHEDULE_COLUMNS + ((LOCAL_SCHEMA_COLUMN,) if local_schema else ()))
	found = []
	# An app's declared schedule (btu_schedules) is this BTU's own, synced after the patches.
	pending = "coalesce(time_zone, '') = '' and coalesce(declared_by_app, '') = ''"
	rows = frappe.db.sql(f"select {fields} from `{tables.schedule}` where {pending}", as_dict=True)
	now = datetime.now(timezone.utc)
	for row in rows:
		change = convert_schedule(row, local_schema=local_schema, config_zone=config_zone, system_zone=system_zone)
		values = dict(change.values)
		if change.notes:
			found.append(notes.note(SCHEDULE, row.name, "cron_string", row.cron_string, "; ".join(change.notes)))
		moved = moments.changed(
			row, values, local_schema=local_schema, config_zone=config_zone, system_zone=system_zone, now=now
		)
		if moved:
			found.append(notes.note(SCHEDULE, row.name, moments.FIELD, row.cron_string, moments.describe(moved)))
		found += _json(SCHEDULE, row.name, "argument_overrides", row.argument_overrides, values)
		if row.name in bad_hours:
			values.update(
				paused=1,
				pause_note=(
					"Paused by the upgrade from the original BTU: its hour was not a whole hour; set it, then unpause"
				),
			)
		_update(tables.schedule, row.name, values)
	return found


def logs(tables: Tables) -> list[dict]:
	if "success_fail" not in tables.columns(tables.log):
		return []
	pending = f"from `{tables.log}` where coalesce(status, '') = ''"
	found = [
		notes.note(
			LOG,
			f"logs with success_fail {value!r}",
			"success_fail",
			value,
			f"is not a status the original BTU wrote; these {count} logs now say {UNKNOWN_STATUS} and keep the value "
			"in success_fail",
		)
		for value, count in frappe.db.sql(
			f"select success_fail, count(*) {pending} and coalesce(success_fail, '') not in %s group by success_fail",
			(tuple(LOG_STATUS),),
		)
	]
	cases = " ".join(f"when {frappe.db.escape(old)} then {frappe.db.escape(new)}" for old, new in LOG_STATUS.items())
	frappe.db.sql(
		f"update `{tables.log}` set status = case success_fail {cases} else {frappe.db.escape(UNKNOWN_STATUS)} end "
		"where coalesce(status, '') = ''"
	)
	return found


def _json(doctype: str, name: str, field: str, text, values: dict) -> list[dict]:
	"""Put `field`'s JSON in `values` when `text` is a Python literal; a note when it is neither."""
	try:
		converted = to_json(field, text)
	except LiteralError as exc:
		return [
			notes.note(
				doctype,
				name,
				field,
				text,
				f"{exc.problem}; it is kept as it was, and runs that read it fail until it is fixed",
			)
		]
	if converted is not None:
		values[field] = converted
	return []


def _update(table: str, name: str, values: dict) -> None:
	if values:
		assignments = ", ".join(f"`{field}` = %s" for field in values)
		frappe.db.sql(f"update `{table}` set {assignments} where name = %s", (*values.values(), name))
