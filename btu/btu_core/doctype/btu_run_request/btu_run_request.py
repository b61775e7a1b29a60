"""BTU Run Request: one retry, backfilled slot or chained run, fired by the scheduler at run_at (`btu.btu_core.run_requests`)."""

import frappe
from frappe import _
from frappe.model.document import Document


class BTURunRequest(Document):
	def on_trash(self):
		# A deleted pending request must leave the scheduler too; cancelling says so and keeps the record.
		if self.status in ("Pending", "Waiting"):
			frappe.throw(_("Run request {0} is {1}: cancel it (Cancel button or btu.btu_core.api.cancel_run_request) before deleting it").format(self.name, self.status))
