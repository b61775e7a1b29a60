"""BTU Task Log: one row per run, written only by btu.btu_core.runs.task_run (a Task's run) and
btu.btu_core.runs.enqueue (an enqueued function's, with task_log=True: no Task, its Function set)."""

from __future__ import annotations

import frappe

from btu.btu_core.field_bounds import BoundedDocument
from btu.btu_core.runs.retention import delete_expired
from btu.btu_core.sealed.document import SealedDocument


class BTUTaskLog(SealedDocument, BoundedDocument):
	# Frappe's exporter writes this block with its imports sorted as text; isort would reorder them.
	# isort: off
	# begin: auto-generated types
	# This code is auto-generated. Do not modify anything in this block.

	from typing import TYPE_CHECKING

	if TYPE_CHECKING:
		from frappe.types import DF

		attempt: DF.Int
		date_time_ended: DF.Datetime | None
		date_time_enqueued: DF.Datetime | None
		date_time_started: DF.Datetime | None
		execution_time: DF.Float
		fire_lag_ms: DF.Float
		first_attempt_log: DF.Link | None
		logging_output: DF.Code | None
		method: DF.Data | None
		origin: DF.Literal["", "Retry", "Backfill", "Chain", "Enqueue"]
		parent_log: DF.Link | None
		result_message: DF.Code | None
		retried: DF.Check
		rq_job_id: DF.Data | None
		run_request: DF.Link | None
		schedule: DF.Link | None
		site: DF.Data | None
		slot: DF.Datetime | None
		slot_utc: DF.Data | None
		start_lag_ms: DF.Float
		status: DF.Literal["Started", "Succeeded", "Failed", "Timed Out", "Skipped"]
		stderr: DF.Code | None
		stdout: DF.Code | None
		task: DF.Link | None
		task_component: DF.Data | None
		task_desc_short: DF.Data | None
		traceback: DF.Code | None
		worker: DF.Data | None
	# end: auto-generated types
	# isort: on
	pass


def on_doctype_update():
	frappe.db.add_index("BTU Task Log", ["schedule", "slot_utc"])
	frappe.db.add_index("BTU Task Log", ["status", "date_time_started"])
	# A Task's newest Logs: the failure streak of a Task-level Consecutive Failures rule (alerts/run_events.py).
	frappe.db.add_index("BTU Task Log", ["task", "creation"])


def delete_expired_logs() -> int:
	"""Daily (btu_schedules in hooks.py): delete Logs older than BTU Configuration.log_retention_days (0 keeps all)."""
	return delete_expired("BTU Task Log", "creation", {}, "BTU Task Logs")
