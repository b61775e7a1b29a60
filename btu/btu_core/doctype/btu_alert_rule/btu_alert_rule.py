"""BTU Alert Rule: on which event of a Task or Schedule to tell whom, and how (btu.btu_core.alerts)."""

from frappe.model.document import Document


class BTUAlertRule(Document):
	# Frappe's exporter writes this block with its imports sorted as text; isort would reorder them.
	# isort: off
	# begin: auto-generated types
	# This code is auto-generated. Do not modify anything in this block.

	from typing import TYPE_CHECKING

	if TYPE_CHECKING:
		from frappe.types import DF

		by_bell: DF.Check
		by_email: DF.Check
		event: DF.Literal[
			"Failure", "Consecutive Failures", "Missed Fire", "Late Start", "Stuck Run", "Scheduler Down", "Paused"
		]
		notify_recovery: DF.Check
		parent: DF.Data
		parentfield: DF.Data
		parenttype: DF.Data
		recipients: DF.SmallText | None
		role: DF.Link | None
		threshold: DF.Int
		webhook_secret: DF.Password | None
		webhook_url: DF.Data | None
	# end: auto-generated types
	# isort: on
	pass
