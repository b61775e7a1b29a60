"""Install and uninstall: BTU's roles, configuration defaults, and a clean removal."""

from __future__ import annotations

from pathlib import Path

import frappe
from frappe.utils.dashboard import sync_dashboards

from btu.btu_core.schedules import declared_schedules
from btu.btu_core.schedules.hook_entries import HOOK
from btu.btu_core.sealed import store
from btu.btu_core.setup.roles import BTU_MANAGER_ROLE, BTU_METRICS_READER_ROLE
from btu.shared import sealed

HOOKED_METHOD_PREFIX = "btu."
WORKSPACE = "BTU"
BTU_MODULE = "btu_core"  # modules.txt's "BTU Core", as Frappe's module map scrubs it
# Each role BTU makes -> its desk access: the metrics reader (Prometheus's API user) needs no Desk.
ROLES = {BTU_MANAGER_ROLE: 1, BTU_METRICS_READER_ROLE: 0}


def before_install() -> None:
	"""Make Frappe see BTU's modules before install-app syncs them.

	`bench get-app` adds btu to apps.txt, but every process of a running bench
	reads the app -> modules map from the Redis cache, built before btu was
	there. install-app clears that cache yet keeps its own copy
	(frappe.local.app_modules), so it would sync none of BTU's DocTypes and
	fail with "No module named 'frappe.core.doctype.btu_configuration'".
	"""
	if BTU_MODULE in (frappe.local.app_modules or {}).get("btu", []):
		return
	frappe.cache.delete_value(["app_modules", "installed_app_modules"])
	frappe.setup_module_map()


def compile_bytecode() -> None:
	"""Write BTU's bytecode (after install and every migrate), whatever PYTHONDONTWRITEBYTECODE says and however the
	bench was built (uv and editable installs write none): RQ forks a fresh work-horse for every job, which would
	compile BTU's run path from source on every run (about 45 ms of CPU). Python checks each file against its source,
	so a stale one is never used; files up to date are not written again."""
	import compileall

	root = Path(__file__).resolve().parents[1]
	if not compileall.compile_dir(str(root), quiet=2):
		frappe.logger("btu").warning(
			f"site={frappe.local.site} bytecode of {root} not written (read-only, or a file that does not compile)"
		)


def ensure_roles() -> None:
	"""Make the roles BTU lacks; also after every migrate, so a site installed before a role existed gets it."""
	for role, desk_access in ROLES.items():
		if not frappe.db.exists("Role", role):
			frappe.get_doc({"doctype": "Role", "role_name": role, "desk_access": desk_access}).insert(
				ignore_permissions=True
			)


def after_install() -> None:
	store.ensure_table()
	ensure_roles()
	frappe.db.set_value("Role", BTU_MANAGER_ROLE, "desk_access", 1)
	config = frappe.get_single("BTU Configuration")
	# A Single has no row until saved: store the field defaults explicitly.
	for field in config.meta.fields:
		if field.default and config.get(field.fieldname) in (None, ""):
			config.set(field.fieldname, field.default)
	config.flags.ignore_permissions = True
	config.save()
	# BTU's own maintenance schedules (btu_schedules in hooks.py), without waiting for a migrate.
	declared_schedules.sync({"btu": frappe.get_hooks(HOOK, app_name="btu")})
	# Frappe v16 makes an app's workspace sidebar and desktop icon in after_app_install, which runs after this
	# and before install-app syncs the app's dashboards: the sidebar's link to Dashboard "BTU" needs it now.
	sync_dashboards("btu")
	compile_bytecode()
	frappe.db.commit()


def ensure_desk_entry() -> None:
	"""Frappe v16 (after every migrate): BTU's workspace sidebar and desktop icon, for sites where install-app could not
	make them (before BTU synced its dashboards early, see after_install, the sidebar's link to Dashboard "BTU" failed
	with "Failed To Create Sidebar" and no icon followed). Frappe's own generator runs again while either is missing;
	it only adds what is missing. v15 has neither DocType."""
	if not frappe.db.table_exists("Workspace Sidebar") or not frappe.db.table_exists("Desktop Icon"):
		return
	if frappe.db.exists("Workspace Sidebar", {"title": WORKSPACE}) and frappe.db.exists(
		"Desktop Icon", {"label": WORKSPACE, "icon_type": "Link"}
	):
		return
	from frappe.utils.install import auto_generate_icons_and_sidebar

	auto_generate_icons_and_sidebar()


def before_uninstall() -> None:
	"""Remove what Frappe does not drop with the module: hook jobs and their logs."""
	jobs = frappe.get_all("Scheduled Job Type", filters={"method": ("like", f"{HOOKED_METHOD_PREFIX}%")}, pluck="name")
	for name in jobs:
		frappe.db.delete("Scheduled Job Log", {"scheduled_job_type": name})
		frappe.delete_doc("Scheduled Job Type", name, ignore_permissions=True, force=True)


def after_uninstall() -> None:
	for role in ROLES:
		frappe.db.delete("Has Role", {"role": role})
		if frappe.db.exists("Role", role):
			frappe.delete_doc("Role", role, ignore_permissions=True, force=True)
	frappe.db.delete("Singles", {"doctype": "BTU Configuration"})
	frappe.db.sql_ddl(f"drop table if exists `{sealed.TABLE}`")
	frappe.db.commit()
