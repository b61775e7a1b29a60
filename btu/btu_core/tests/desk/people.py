"""The people who use the Desk in the browser tests, each a committed User with a password.

Administrator passes every permission check, so it proves nothing: a System Manager who is not Administrator, a BTU
Manager, and a Desk user with no BTU role (a role of its own with Desk access, so the Desk opens for them).
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum

import frappe
from frappe.utils.password import update_password

PASSWORD = "Btu-desk-Test-7!"
DESK_ROLE = "BTU Desk Test Role"


class Person(Enum):
	SYSTEM_MANAGER = "system_manager"
	BTU_MANAGER = "btu_manager"
	PLAIN_USER = "plain_user"


@dataclass(frozen=True)
class Login:
	email: str
	roles: tuple[str, ...]


LOGINS = {
	Person.SYSTEM_MANAGER: Login("btu-desk-sysman@example.com", ("System Manager",)),
	Person.BTU_MANAGER: Login("btu-desk-manager@example.com", ("BTU Manager",)),
	Person.PLAIN_USER: Login("btu-desk-plain@example.com", (DESK_ROLE,)),
}


def make_people() -> None:
	"""Each person's User (enabled, a System User, with exactly their roles and PASSWORD), committed."""
	if not frappe.db.exists("Role", DESK_ROLE):
		frappe.get_doc({"doctype": "Role", "role_name": DESK_ROLE, "desk_access": 1}).insert(ignore_permissions=True)
	for login in LOGINS.values():
		if frappe.db.exists("User", login.email):
			user = frappe.get_doc("User", login.email)
		else:
			user = frappe.new_doc("User")
			user.update({"email": login.email, "first_name": login.email.split("@")[0], "send_welcome_email": 0})
		user.update({"enabled": 1, "user_type": "System User", "time_zone": ""})
		user.set("roles", [{"role": role} for role in login.roles])
		user.save(ignore_permissions=True)
		update_password(login.email, PASSWORD)
	frappe.db.commit()
