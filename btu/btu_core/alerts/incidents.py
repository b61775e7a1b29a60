"""BTU Alert Incidents: one per (rule, scope). An event opens one and sends one message; repeats while it is open are
counted on it, not sent; the end of the problem resolves it and sends one recovery message. Each alert step runs in
its own transaction (`guarded`): nothing here raises into a run or a check."""

from __future__ import annotations

import frappe
from frappe import _
from frappe.utils import cint

from btu.btu_core.alerts.delivery import deliver
from btu.btu_core.alerts.rules import INCIDENT
from btu.btu_core.instants import to_system_naive, utc_now


def guarded(function, *args) -> None:
	"""Run one alert step in its own transaction; an error is logged and rolled back, never raised."""
	try:
		function(*args)
		frappe.db.commit()
	except Exception:
		frappe.db.rollback()
		frappe.logger("btu").exception(f"site={frappe.local.site} alerts: {function.__name__} failed")


def open_incident(rule, task: str, schedule: str | None, message: str, key: str, log: str | None = None) -> str | None:
	"""Open `rule`'s incident for `schedule` and send its message; one already open counts the occurrence
	(once per `key`) instead. Returns the incident opened, None when one was open."""
	lock(rule)
	open_one = frappe.db.get_value(
		INCIDENT, incident_filters(rule, schedule), ["name", "last_key", "occurrences"], as_dict=True, for_update=True
	)
	if open_one:
		if open_one.last_key != key:
			frappe.db.set_value(
				INCIDENT,
				open_one.name,
				{"occurrences": cint(open_one.occurrences) + 1, "last_key": key, "last_message": message, "log": log},
			)
		return None
	incident = frappe.get_doc(
		{
			"doctype": INCIDENT,
			"status": "Open",
			"kind": rule.event,
			"task": task,
			"schedule": schedule,
			"rule": rule.name,
			"rule_parenttype": rule.parenttype,
			"rule_parent": rule.parent,
			"opened_at": to_system_naive(utc_now()),
			"occurrences": 1,
			"last_key": key,
			"last_message": message,
			"log": log,
		}
	).insert(ignore_permissions=True)
	deliver(rule, incident, "opened")
	return incident.name


def resolve(rule, schedule: str | None, resolution: str) -> list[str]:
	"""Resolve `rule`'s open incident for `schedule`, with its recovery message if the rule asks for one."""
	lock(rule)
	names = frappe.db.get_values(INCIDENT, incident_filters(rule, schedule), "name", pluck=True, for_update=True)
	for name in names:
		incident = close(name, resolution)
		if incident and cint(rule.notify_recovery):
			deliver(rule, incident, "resolved")
	return names


def lock(rule) -> None:
	"""Serialise `rule`'s incidents: two workers failing at once open one, and a success resolves what a failure
	committed just before. The reads after it lock too: under REPEATABLE READ a plain read sees the snapshot of
	the transaction's first read, from before the other worker committed."""
	frappe.db.sql("select name from `tabBTU Alert Rule` where name = %s for update", rule.name)


def close(name: str, resolution: str):
	"""Mark an incident Resolved; None if it was not open any more."""
	incident = frappe.get_doc(INCIDENT, name, for_update=True)
	if incident.status != "Open":
		return None
	incident.update({"status": "Resolved", "resolved_at": to_system_naive(utc_now()), "resolution": resolution})
	incident.save(ignore_permissions=True)
	return incident


def incident_filters(rule, schedule: str | None) -> dict:
	return {"rule": rule.name, "status": "Open", "schedule": schedule or ("is", "not set")}


def resolve_by_hand(incident: str, note: str | None = None) -> dict:
	"""Resolve an incident without a recovery message: the problem may not be over, and its next occurrence alerts
	again."""
	resolution = _("Resolved by {0}").format(frappe.session.user) + (f": {note}" if note else "")
	closed = close(incident, resolution)
	frappe.db.commit()
	return {"incident": incident, "resolved": closed is not None, "resolution": resolution if closed else None}
