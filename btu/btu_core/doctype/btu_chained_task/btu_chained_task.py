"""BTU Chained Task: a task one Task's run starts on its success or failure."""

from frappe.model.document import Document


class BTUChainedTask(Document):
	pass
