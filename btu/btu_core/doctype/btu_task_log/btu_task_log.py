"""BTU Task Log: one row per run, written only by btu.btu_core.task_runner."""

from __future__ import annotations

from datetime import timedelta

import frappe
from frappe.model.document import Document
from frappe.utils import cint, now_datetime


class BTUTaskLog(Document):
	pass


def on_doctype_update():
	frappe.db.add_index("BTU Task Log", ["schedule", "slot_utc"])
	frappe.db.add_index("BTU Task Log", ["status", "date_time_started"])


def delete_expired_logs() -> int:
	"""Daily (hooks.py): delete Logs older than BTU Configuration.log_retention_days (0 keeps all)."""
	days = cint(frappe.db.get_single_value("BTU Configuration", "log_retention_days"))
	if days <= 0:
		return 0
	cutoff = now_datetime() - timedelta(days=days)
	count = frappe.db.count("BTU Task Log", {"creation": ("<", cutoff)})
	if count:
		frappe.db.delete("BTU Task Log", {"creation": ("<", cutoff)})
		frappe.db.commit()
		frappe.logger("btu").info(f"site={frappe.local.site} deleted {count} BTU Task Logs older than {days} days")
	return count
