"""BTU Chained Task: a task one Task's run starts on its success or failure."""

from frappe.model.document import Document


class BTUChainedTask(Document):
	# Frappe's exporter writes this block with its imports sorted as text; isort would reorder them.
	# isort: off
	# begin: auto-generated types
	# This code is auto-generated. Do not modify anything in this block.

	from typing import TYPE_CHECKING

	if TYPE_CHECKING:
		from frappe.types import DF

		delay_secs: DF.Int
		next_task: DF.Link
		on_outcome: DF.Literal["Success", "Failure", "Any"]
		parent: DF.Data
		parentfield: DF.Data
		parenttype: DF.Data
	# end: auto-generated types
	# isort: on

	pass
