"""Who BTU may mail or notify, by whose choice.

A Task's, a Schedule's and BTU Configuration's Email Recipients and the Recipients and Role of alert rules decide
where the site's mail server sends what runs leave. A BTU Manager may name the site's enabled Desk users (System
Users, by user id or email) and BTU's own roles; any other address or role (an outside address, a portal user, a
role portal users hold) is a System Manager's choice: otherwise a BTU Manager could use the site's SMTP as a relay.
"""

from __future__ import annotations

import re

import frappe
from frappe import _

from btu.btu_core.setup.roles import BTU_ROLES


def recipient_names(rule) -> list[str]:
	"""An alert rule's Recipients: addresses and user ids, split on commas, semicolons and spaces."""
	return [part.strip() for part in re.split(r"[,;\s]+", rule.recipients or "") if part.strip()]


def require_system_manager_for_outsiders(doc) -> None:
	"""Raise frappe.PermissionError if a user without System Manager adds, to any row of `doc`, a recipient who is not
	an enabled System User of the site, or a role that is not BTU's. Names a row held before the save stay: a BTU
	Manager may edit a Task whose rules a System Manager pointed outside."""
	user = frappe.session.user
	if user == "Administrator" or "System Manager" in frappe.get_roles(user):
		return
	before = doc.get_doc_before_save()
	for table, field, names_of, allowed in RECIPIENT_FIELDS:
		earlier = {row.name: row for row in (before.get(table) or [])} if before is not None else {}
		for row in doc.get(table) or []:
			prior = earlier.get(row.name)
			held = set(names_of(prior.get(field))) if prior is not None else set()
			added = [name for name in names_of(row.get(field)) if name not in held]
			outsiders = [name for name in added if not allowed(name)]
			if outsiders:
				refuse(doc, table, field, row.idx, outsiders, user)


def site_user(name: str) -> bool:
	"""Whether `name` (a user id or an email address) is an enabled System User of this site."""
	enabled = [["enabled", "=", 1], ["user_type", "=", "System User"], ["name", "!=", "Guest"]]
	return any(frappe.db.exists("User", [*enabled, [field, "=", name]]) for field in ("name", "email"))


def btu_role(name: str) -> bool:
	return name in BTU_ROLES


def one_address(value: str | None) -> list[str]:
	return [value.strip()] if value and value.strip() else []


def listed_names(value: str | None) -> list[str]:
	return recipient_names(frappe._dict(recipients=value))


def one_role(value: str | None) -> list[str]:
	return [value] if value else []


# (table, field, its value as names, who a BTU Manager may name): the fields of a Task, a Schedule or BTU Configuration
# naming who is told.
RECIPIENT_FIELDS = (
	("email_recipients", "email_address", one_address, site_user),
	("alert_rules", "recipients", listed_names, site_user),
	("alert_rules", "role", one_role, btu_role),
)


def refuse(doc, table: str, field: str, idx: int, outsiders: list[str], user: str) -> None:
	allowed = (
		_("one of BTU's roles ({0})").format(", ".join(_(role) for role in BTU_ROLES))
		if field == "role"
		else _("an enabled System User of this site")
	)
	frappe.throw(
		_(
			"{0} {1}, {2} row {3}: {4} {5}: only a System Manager may name what is not {6}; user {7} lacks that role "
			"(name {6} instead, or ask a System Manager to make the change)"
		).format(_(doc.doctype), doc.name or _("(new)"), table, idx, field, ", ".join(outsiders), allowed, user),
		frappe.PermissionError,
		title=_("Not permitted"),
	)
