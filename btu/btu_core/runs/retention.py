"""How long BTU keeps what its runs leave: Task Logs and finished Run Requests, both for BTU Configuration's
log_retention_days (one setting: a request and the Log of its run go together)."""

from __future__ import annotations

from datetime import timedelta

import frappe
from frappe.utils import cint, now_datetime

from btu.btu_core.sealed import store


def delete_expired(doctype: str, age_field: str, filters: dict, what: str) -> int:
	"""Delete the rows of `doctype` matching `filters` whose `age_field` is older than the retention (0 keeps all):
	how many. `what` names them in the log line."""
	days = cint(frappe.db.get_single_value("BTU Configuration", "log_retention_days"))
	if days <= 0:
		return 0
	expired = {**filters, age_field: ("<", now_datetime() - timedelta(days=days))}
	count = frappe.db.count(doctype, expired)
	if count:
		frappe.db.delete(doctype, expired)
		store.forget_orphans(doctype)
		frappe.db.commit()
		frappe.logger("btu").info(f"site={frappe.local.site} deleted {count} {what} older than {days} days")
	return count
