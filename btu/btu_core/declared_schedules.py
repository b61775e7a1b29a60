"""Declared schedules: each installed app's `btu_schedules` hook synced into BTU Tasks and Schedules.

Runs after BTU's install, after every `bench migrate`, and when an app is installed or uninstalled
(hooks.py). Each entry becomes one Task and one Schedule marked with the app and the entry's name.
The fields of btu.shared.declared_schedules' TASK_FIELDS and SCHEDULE_FIELDS are the app's: written at
every sync, refused on any other save. Everything else is the admin's and never written after the
row is made: enabled, paused, the time zone (see zone_after), calendar, skipped runs, alerts, email.

An entry gone from its hook, or whose app is no longer installed, loses its rows. Task Logs and Run
Requests link to them, and Frappe refuses to delete what is linked, so such rows are kept disabled,
their key cleared ("retired"), and deleted at a later sync once nothing links to them (log retention
removes the Logs). A bad hook raises, naming the app, the entry and the key, and changes nothing.
"""

from __future__ import annotations

import frappe
from frappe import _
from frappe.utils import cast

from btu.btu_core.messages import input_error
from btu.btu_core.scheduler_link import announce_after_commit
from btu.shared import protocol
from btu.shared.declared_schedules import (
	HOOK, SCHEDULE_FIELDS, Declared, DeclaredScheduleError, check_entries, where, zone_after,
)  # fmt: skip

TASK = "BTU Task"
SCHEDULE = "BTU Task Schedule"
# Set on the documents the sync saves or deletes: the one path allowed to change a declared row's app fields.
FLAG = "from_declared_sync"
SAVEPOINT = "btu_declared_schedules"
# What stays the admin's on a declared row, as a refused save names it (README: Declaring schedules).
ADMIN_FIELDS = {
	TASK: "Long Description, Task Group, Max Concurrent Runs, Run Only as Worker, alert rules, email recipients and chained tasks",
	SCHEDULE: "Enabled, Paused, Time Zone, Calendar, skipped runs, Start/End Time, Run Limit, Pause After Failures, alert rules and email recipients",
}


def sync(declared: dict[str, list] | None = None) -> None:
	"""Make declared rows match the hooks, and remove those of apps no longer installed.

	`declared` maps apps to their hook lists and syncs only those apps (tests, app install); None
	reads every installed app's hook. All lists are checked before anything is written, and a save
	refused by a Task's or Schedule's own validation undoes the whole sync.
	"""
	installed = frappe.get_installed_apps()
	if declared is None:
		declared = {app: frappe.get_hooks(HOOK, app_name=app) for app in installed}
	try:
		wanted = {app: check_entries(app, entries) for app, entries in declared.items()}
	except DeclaredScheduleError as exc:
		frappe.throw(input_error(exc), title=_("Invalid {0} hook").format(HOOK))
	frappe.db.savepoint(SAVEPOINT)
	try:
		for items in wanted.values():
			for item in items:
				apply(item)
		for task, schedule in stale_rows(wanted, installed):
			remove(task, schedule)
	except Exception:
		frappe.db.rollback(save_point=SAVEPOINT)
		raise


def app_installed(app: str) -> None:
	"""after_app_install: the new app's schedules, now rather than at the next migrate."""
	sync({app: frappe.get_hooks(HOOK, app_name=app)})


def app_uninstalled(app: str) -> None:
	"""after_app_uninstall: the removed app's rows go (sync removes rows of apps no longer installed).

	Committed here: Frappe's remove_app calls this hook after its own last commit, and `uninstall-app` then closes
	the connection without committing, so uncommitted removals would be rolled back (and the scheduler never told)."""
	sync({})
	frappe.db.commit()


def apply(item: Declared) -> None:
	"""Create or update the entry's Task, then its Schedule; a save the controllers refuse names the entry."""
	try:
		task = _declared_doc(TASK, item)
		_write(task, {**item.task, "declared_by_app": item.app, "declared_key": item.key})
		schedule = _declared_doc(SCHEDULE, item)
		zone = item.time_zone if schedule.is_new() else zone_after(schedule.time_zone, schedule.declared_time_zone, item.time_zone)
		values = {field: None for field in SCHEDULE_FIELDS}  # the Schedule's overrides stay blank: the Task's apply
		values.update(item.schedule, task=task.name, time_zone=zone, declared_by_app=item.app, declared_key=item.key, declared_time_zone=item.time_zone)
		_write(schedule, values)
	except frappe.ValidationError as exc:
		frappe.throw(f"{where(item.app, item.key)}: {exc}", title=_("Invalid {0} hook").format(HOOK))


def _declared_doc(doctype: str, item: Declared):
	name = frappe.db.get_value(doctype, {"declared_by_app": item.app, "declared_key": item.key})
	return frappe.get_doc(doctype, name) if name else frappe.new_doc(doctype)


def _write(doc, values: dict) -> None:
	"""Set the app's values (None: the DocType's default) and save, only when something differs."""
	values = {field: _or_default(doc, field, value) for field, value in values.items()}
	if not doc.is_new() and not differing(doc, values):
		return
	doc.update(values)
	doc.flags.ignore_permissions = True
	doc.flags[FLAG] = True
	doc.save()


def _or_default(doc, field: str, value):
	if value is not None:
		return value
	docfield = doc.meta.get_field(field)
	return cast(docfield.fieldtype, docfield.default) if docfield and docfield.default else None


def differing(doc, values: dict) -> list[str]:
	"""The fields whose value in `doc` is not the one in `values` (None, "" and 0 alike, as the database stores them)."""
	return [field for field, value in values.items() if (doc.get(field) or None) != (value or None)]


def stale_rows(wanted: dict[str, list[Declared]], installed: list[str]) -> list[tuple[str, str | None]]:
	"""(task, schedule) of declared rows no hook wants: entries gone from a synced app's hook, apps no longer
	installed, and rows retired earlier."""
	keys = {app: {item.key for item in items} for app, items in wanted.items()}
	stale = []
	for task in frappe.get_all(TASK, filters={"declared_by_app": ("is", "set")}, fields=["name", "declared_by_app", "declared_key"]):
		app = task.declared_by_app
		if app in installed and app not in keys:
			continue  # not synced this time
		if task.declared_key and task.declared_key in keys.get(app, ()):
			continue
		schedule = frappe.db.get_value(SCHEDULE, {"task": task.name, "declared_by_app": app})
		stale.append((task.name, schedule))
	return stale


def remove(task: str, schedule: str | None) -> None:
	"""Delete a stale Schedule, then its Task; what Logs or Run Requests still link to is retired instead."""
	if schedule:
		if is_linked(SCHEDULE, schedule):
			retire(SCHEDULE, schedule)
			retire(TASK, task)
			return
		frappe.delete_doc(SCHEDULE, schedule, ignore_permissions=True, flags={FLAG: True})
	if is_linked(TASK, task):
		retire(TASK, task)
		return
	frappe.delete_doc(TASK, task, ignore_permissions=True, flags={FLAG: True})


def is_linked(doctype: str, name: str) -> bool:
	"""Whether Frappe would refuse to delete the row for the links to it (ignore_links_on_delete aside)."""
	from frappe.model.delete_doc import check_if_doc_is_linked

	try:
		check_if_doc_is_linked(frappe.get_doc(doctype, name))
	except frappe.LinkExistsError:
		frappe.clear_last_message()
		return True
	return False


def retire(doctype: str, name: str) -> None:
	"""Key cleared, a Schedule disabled. Written directly: the validation a save runs would import the function,
	which an uninstalled app no longer has."""
	values = {"declared_key": None, **({"enabled": 0} if doctype == SCHEDULE else {})}
	current = frappe.db.get_value(doctype, name, list(values), as_dict=True)
	if not any(current.values()):
		return  # retired at an earlier sync
	if current.get("enabled"):
		announce_after_commit(protocol.CANCEL_TASK_SCHEDULE, name, only_if_running=True)
	frappe.db.set_value(doctype, name, values)


# -- the Desk's side: declared rows in the forms and on every other save ---------------------------


def check_save(doc, fields: tuple[str, ...]) -> None:
	"""Refuse a save that is not the sync's and changes a declared row's app fields, or enables a retired Schedule."""
	if doc.flags.get(FLAG):
		return
	before = doc.get_doc_before_save()
	app = doc.get("declared_by_app") or (before.get("declared_by_app") if before is not None else None)
	if not app:
		return
	if before is None:
		frappe.throw(
			_("{0}: declared_by_app {1} is set only by bench migrate, from that app's {2} hook; leave it empty for a schedule made here").format(
				_(doc.doctype), app, HOOK
			),
			title=_("Declared by app {0}").format(app),
		)
	changed = differing(doc, {field: before.get(field) for field in fields})
	if changed:
		frappe.throw(
			_("{0} {1}: {2} declared by app {3} in its hooks.py; edit its {4} entry there and run bench migrate. Here you may change {5}").format(
				_(doc.doctype), doc.name or _("(new)"), ", ".join(changed), app, HOOK, ADMIN_FIELDS[doc.doctype]
			),
			title=_("Declared by app {0}").format(app),
		)
	if doc.doctype == SCHEDULE and not doc.declared_key and doc.enabled:
		frappe.throw(
			_("{0} {1}: removed from the {2} hook of app {3}; it stays disabled until a bench migrate deletes it").format(
				_(doc.doctype), doc.name, HOOK, app
			),
			title=_("Declared by app {0}").format(app),
		)


def check_delete(doc) -> None:
	"""Refuse deleting a declared row by hand: the next migrate would make it again."""
	if doc.get("declared_key") and not doc.flags.get(FLAG):
		frappe.throw(
			_("{0} {1}: declared by app {2} in its hooks.py ({3} entry {4}); remove the entry there and run bench migrate, "
				"or disable or pause the schedule here").format(_(doc.doctype), doc.name, doc.declared_by_app, HOOK, doc.declared_key),
			title=_("Declared by app {0}").format(doc.declared_by_app),
		)


def form_hint(doc, fields: tuple[str, ...]) -> None:
	"""What the form shows of a declared row: the intro, and which fields to make read-only (onload)."""
	if not doc.get("declared_by_app"):
		return
	if doc.declared_key:
		intro = _("Declared by app {0} in hooks.py ({1} entry {2}): edit the hook and run bench migrate to change the greyed fields.").format(
			doc.declared_by_app, HOOK, doc.declared_key
		)
	else:
		intro = _("Removed from the {0} hook of app {1}: kept disabled while Task Logs or Run Requests point to it; a later bench migrate deletes it.").format(
			HOOK, doc.declared_by_app
		)
	doc.set_onload("btu_declared", {"intro": intro, "fields": list(fields)})
