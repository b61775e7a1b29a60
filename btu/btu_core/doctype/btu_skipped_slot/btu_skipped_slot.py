"""BTU Skipped Slot: one run of a schedule that will not happen (skip next run)."""

from frappe.model.document import Document


class BTUSkippedSlot(Document):
	# Frappe's exporter writes this block with its imports sorted as text; isort would reorder them.
	# isort: off
	# begin: auto-generated types
	# This code is auto-generated. Do not modify anything in this block.

	from typing import TYPE_CHECKING

	if TYPE_CHECKING:
		from frappe.types import DF

		parent: DF.Data
		parentfield: DF.Data
		parenttype: DF.Data
		skipped_by: DF.Data | None
		slot_local: DF.Data | None
		slot_utc: DF.Data
	# end: auto-generated types
	# isort: on
	pass
