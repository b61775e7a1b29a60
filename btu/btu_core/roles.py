"""Who may drive BTU: System Manager, or the BTU Manager role the app creates."""

from __future__ import annotations

import frappe

BTU_MANAGER_ROLE = "BTU Manager"
BTU_ROLES = ("System Manager", BTU_MANAGER_ROLE)


def require_btu_manager() -> None:
	"""Raise frappe.PermissionError unless the session user holds a BTU role.

	Not `frappe.only_for`: that one returns early whenever `flags.in_test` is
	set, so the tests could never prove the check.
	"""
	user = frappe.session.user
	if user == "Administrator":
		return
	if set(BTU_ROLES).isdisjoint(frappe.get_roles(user)):
		raise frappe.PermissionError(
			f"user {user} may not use BTU: this needs the role {' or '.join(BTU_ROLES)} "
			"(ask a System Manager to add it in the user's Roles)"
		)
