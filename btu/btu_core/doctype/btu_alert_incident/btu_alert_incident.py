"""BTU Alert Incident: one open problem of a Task or Schedule, so an alert rule sends one message, not one per
repeat."""

from btu.btu_core.field_bounds import BoundedDocument


class BTUAlertIncident(BoundedDocument):
	# Frappe's exporter writes this block with its imports sorted as text; isort would reorder them.
	# isort: off
	# begin: auto-generated types
	# This code is auto-generated. Do not modify anything in this block.

	from typing import TYPE_CHECKING

	if TYPE_CHECKING:
		from frappe.types import DF

		delivery_errors: DF.Text | None
		kind: DF.Literal[
			"Failure", "Consecutive Failures", "Missed Fire", "Late Start", "Stuck Run", "Scheduler Down", "Paused"
		]
		last_key: DF.Data | None
		last_message: DF.SmallText | None
		log: DF.Link | None
		occurrences: DF.Int
		opened_at: DF.Datetime | None
		resolution: DF.SmallText | None
		resolved_at: DF.Datetime | None
		rule: DF.Data | None
		rule_parent: DF.DynamicLink | None
		rule_parenttype: DF.Data | None
		schedule: DF.Link | None
		status: DF.Literal["Open", "Resolved"]
		task: DF.Link | None
	# end: auto-generated types
	# isort: on
	pass
