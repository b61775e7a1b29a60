"""Who may drive BTU (System Manager, or the BTU Manager role the app creates) and who may read its metrics."""

from __future__ import annotations

import frappe
from frappe import _

BTU_MANAGER_ROLE = "BTU Manager"
# Least privilege for Prometheus: reads the metrics endpoint (btu.btu_core.insights.metrics.scrape), nothing else.
BTU_METRICS_READER_ROLE = "BTU Metrics Reader"
BTU_ROLES = ("System Manager", BTU_MANAGER_ROLE)
METRICS_ROLES = (*BTU_ROLES, BTU_METRICS_READER_ROLE)


def require_btu_manager() -> None:
	"""Raise frappe.PermissionError unless the session user holds a BTU role."""
	require_any_role(
		BTU_ROLES,
		_(
			"User {0} may not use BTU: this needs one of the roles {1} (ask a System Manager to add it in the user's "
			"Roles)"
		),
	)


def require_any_role(roles: tuple[str, ...], refusal: str) -> None:
	"""Raise frappe.PermissionError with `refusal` unless the session user (Administrator always) holds one of `roles`.

	`refusal` is a whole translated sentence, so translators can order it: {0} is the user, {1} the roles that would do.
	Not `frappe.only_for`: that one returns early whenever `flags.in_test` is set, so the tests could never prove the
	check.
	"""
	user = frappe.session.user
	if user == "Administrator":
		return
	if set(roles).isdisjoint(frappe.get_roles(user)):
		# frappe.throw, not a bare raise: the message reaches the HTTP reply (_server_messages), not only the log.
		frappe.throw(
			refusal.format(user, ", ".join(_(role) for role in roles)), frappe.PermissionError, title=_("Not permitted")
		)


def is_system_manager() -> bool:
	"""Whether the session user is Administrator or holds System Manager."""
	user = frappe.session.user
	return user == "Administrator" or "System Manager" in frappe.get_roles(user)


def require_system_manager_for(doc, fieldnames: tuple[str, ...], why: str | None = None) -> None:
	"""Raise frappe.PermissionError if a user without System Manager sets or changes one of `fieldnames`.

	By default they choose what code runs and with what: a BTU Manager, or a user the
	document is shared with, may run Tasks but not rewrite them. `why`, a translated clause, names another reason. The
	DocType's permlevel 1 already hides the fields from such users in the
	Desk; this holds on every other path too (REST, `save(ignore_permissions=True)`).
	"""
	user = frappe.session.user
	if user == "Administrator" or "System Manager" in frappe.get_roles(user):
		return
	before = doc.get_doc_before_save()
	for fieldname in fieldnames:
		value = doc.get(fieldname) or None
		if value != ((before.get(fieldname) or None) if before is not None else None):
			raise frappe.PermissionError(
				_(
					"{0} {1}: only a System Manager may set {2}, {3}; "
					"user {4} lacks that role (ask a System Manager to make the change)"
				).format(_(doc.doctype), doc.name or _("(new)"), fieldname, why or _("it decides what code runs"), user)
			)


def require_system_manager_for_rows(doc, table: str, fieldnames: tuple[str, ...]) -> None:
	"""`require_system_manager_for` for the rows of a child table: setting or changing one of `fieldnames` on any row.

	Removing a row, or leaving its value as it was, needs no role beyond the document's own permissions.
	"""
	user = frappe.session.user
	if user == "Administrator" or "System Manager" in frappe.get_roles(user):
		return
	before = doc.get_doc_before_save()
	earlier = {row.name: row for row in (before.get(table) or [])} if before is not None else {}
	for row in doc.get(table) or []:
		prior = earlier.get(row.name)
		for fieldname in fieldnames:
			value = row.get(fieldname) or None
			if value and value != ((prior.get(fieldname) or None) if prior is not None else None):
				raise frappe.PermissionError(
					_(
						"{0} {1}: only a System Manager may set {2} (row {3}); user {4} lacks that role (ask a System "
						"Manager to make the change)"
					).format(_(doc.doctype), doc.name or _("(new)"), fieldname, row.idx, user)
				)
