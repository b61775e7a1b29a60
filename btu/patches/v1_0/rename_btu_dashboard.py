"""BTU's Dashboard "BTU" renamed "BTU Dashboard", and its card "BTU Fire Lag p95 Today (ms)" "BTU Fire Lag p95 Today",
with the links to them (the workspace's shortcut and card, the dashboard's card, v16's sidebar item).

The dashboard: Frappe v16 (16.4) names the workspace's sidebar "BTU" too; its sidebar then takes the route
/app/dashboard-view/BTU for that sidebar's own and skips what show_sidebar_for_module reads, so the Dashboard page
stayed blank ("Cannot read properties of undefined (reading 'includes')"). The card now says its unit with its value
("57.9 s"), and the Dashboard page titles a card with its name. Renamed before the model sync, so the sync updates
the renamed records rather than adding second ones.
"""

import frappe
from frappe.model.rename_doc import rename_doc

RENAMES = (
	("Dashboard", "BTU", "BTU Dashboard"),
	("Number Card", "BTU Fire Lag p95 Today (ms)", "BTU Fire Lag p95 Today"),
)


def execute():
	for doctype, old, new in RENAMES:
		record = frappe.db.get_value(doctype, old, ["module", "is_standard"], as_dict=True)
		if record and record.module == "BTU Core" and record.is_standard and not frappe.db.exists(doctype, new):
			rename_doc(doctype, old, new, force=True, ignore_permissions=True, show_alert=False)
