"""BTU Run Request: one retry, backfilled slot or chained run, fired by the scheduler at run_at
(`btu.btu_core.runs.run_requests`)."""

import frappe
from frappe import _

from btu.btu_core.field_bounds import BoundedDocument
from btu.btu_core.runs.retention import delete_expired
from btu.btu_core.sealed.document import SealedDocument
from btu.shared import run_requests as rr


class BTURunRequest(SealedDocument, BoundedDocument):
	# Frappe's exporter writes this block with its imports sorted as text; isort would reorder them.
	# isort: off
	# begin: auto-generated types
	# This code is auto-generated. Do not modify anything in this block.

	from typing import TYPE_CHECKING

	if TYPE_CHECKING:
		from frappe.types import DF

		attempt: DF.Int
		backfill: DF.Data | None
		chain_depth: DF.Int
		chain_root: DF.Link | None
		enqueued_by: DF.Link | None
		first_log: DF.Link | None
		job_generation: DF.Int
		job_id: DF.Data | None
		kwargs: DF.Code | None
		log: DF.Link | None
		method: DF.Data | None
		note: DF.SmallText | None
		origin: DF.Literal["Retry", "Backfill", "Chain", "Enqueue"]
		parent_log: DF.Link | None
		previous_request: DF.Link | None
		queue: DF.Data | None
		run_as: DF.Link | None
		run_at: DF.Datetime | None
		run_at_utc: DF.Data | None
		schedule: DF.Link | None
		slot_utc: DF.Data | None
		status: DF.Literal["Pending", "Waiting", "Done", "Cancelled"]
		task: DF.Link | None
		task_log: DF.Check
		timeout: DF.Int
	# end: auto-generated types
	# isort: on

	def on_trash(self):
		# A deleted pending request must leave the scheduler too; cancelling says so and keeps the record.
		if self.status in ("Pending", "Waiting"):
			frappe.throw(
				_(
					"Run request {0} is {1}: cancel it (Cancel button or btu.btu_core.api.cancel_run_request) before "
					"deleting it"
				).format(self.name, self.status)
			)
		super().on_trash()


def delete_expired_run_requests() -> int:
	"""Daily (btu_schedules in hooks.py): delete Done and Cancelled requests finished (last modified) longer ago than
	BTU Configuration.log_retention_days (0 keeps all), as their runs' Logs are; a pending one stays until it runs."""
	return delete_expired(
		rr.DOCTYPE, "modified", {"status": ("in", (rr.DONE, rr.CANCELLED))}, "finished BTU Run Requests"
	)
