"""BTU Email Recipient: one address and the run outcomes it is told about."""

from frappe.model.document import Document


class BTUEmailRecipient(Document):
	# Frappe's exporter writes this block with its imports sorted as text; isort would reorder them.
	# isort: off
	# begin: auto-generated types
	# This code is auto-generated. Do not modify anything in this block.

	from typing import TYPE_CHECKING

	if TYPE_CHECKING:
		from frappe.types import DF

		email_address: DF.Data
		email_on_error: DF.Check
		email_on_start: DF.Check
		email_on_success: DF.Check
		email_on_timeout: DF.Check
		parent: DF.Data
		parentfield: DF.Data
		parenttype: DF.Data
	# end: auto-generated types
	# isort: on
	pass
