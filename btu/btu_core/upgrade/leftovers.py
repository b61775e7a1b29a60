"""The original BTU's Page, Reports and Workspace: records whose code went with it, so opening one fails."""

from __future__ import annotations

import frappe

ORIGINAL_RECORDS = (
	("Page", "btu-redis-queue"),
	("Report", "BTU Scheduled Task Summary"),
	("Report", "BTU Task Log Summary"),
	("Report", "Task Log Averages"),
	("Workspace", "Automated Tasks"),
)


def delete() -> None:
	"""Delete those still on the site, one line each; nothing they hold is a user's data."""
	for doctype, name in ORIGINAL_RECORDS:
		if frappe.db.exists(doctype, name):
			frappe.delete_doc(doctype, name, force=True, ignore_permissions=True, ignore_missing=True)
			print(f"BTU upgrade: deleted the original BTU's {doctype} {name} (its code went with it)")
