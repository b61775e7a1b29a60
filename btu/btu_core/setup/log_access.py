"""Who reads the Log of a run an app enqueued (`btu.enqueue_at(..., task_log=True)`): a System Manager only.

Such a run is the app's own background job, as a `frappe.enqueue` job is, and Frappe shows those jobs (RQ Job) to
System Managers only: its output may hold any of the app's data. A field's permlevel cannot say this, as it would hide
the output of every Task's runs too, which BTU Managers read to look after the Tasks; so these hooks (hooks.py)
refuse the rows of origin Enqueue, in a document's permission check and in every list, to everyone else. The
request's kwargs are hidden the same way by their permlevel (btu_run_request.json).
"""

from __future__ import annotations

import frappe

from btu.shared.run_requests import ENQUEUE


def reads_enqueued_runs(user: str | None) -> bool:
	return "System Manager" in frappe.get_roles(user)


def log_has_permission(doc, ptype=None, user=None) -> bool:
	"""`has_permission` hook of BTU Task Log: False for an enqueued run's Log unless `user` is a System Manager; True
	(no objection: the DocType's permissions decide) otherwise. A hook only takes away, on both lines: v15 reads None
	as "undecided", but v16 reads every falsy answer, None included, as a refusal."""
	if doc.get("origin") == ENQUEUE and not reads_enqueued_runs(user):
		return False
	return True


def log_query_conditions(user=None) -> str:
	"""`permission_query_conditions` hook of BTU Task Log: lists leave out enqueued runs' Logs unless `user` is a System
	Manager."""
	if reads_enqueued_runs(user):
		return ""
	return f"ifnull(`tabBTU Task Log`.`origin`, '') != {frappe.db.escape(ENQUEUE)}"
