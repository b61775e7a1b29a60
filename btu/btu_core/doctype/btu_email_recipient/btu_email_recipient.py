"""BTU Email Recipient: one address and the run outcomes it is told about."""

from frappe.model.document import Document


class BTUEmailRecipient(Document):
	pass
