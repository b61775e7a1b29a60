"""Declared schedules: each installed app's `btu_schedules` hook synced into BTU Tasks and Schedules.

Runs after BTU's install, after every `bench migrate`, and when an app is installed or uninstalled
(hooks.py). Each entry becomes one Task and one Schedule marked with the app and the entry's name.
The fields of `hook_entries`' TASK_FIELDS and SCHEDULE_FIELDS are the app's: written at
every sync, refused on any other save. Everything else is the admin's and never written after the
row is made: enabled, paused, the time zone (see zone_after), calendar, skipped runs, alerts, email.

An entry gone from its hook, or whose app is no longer installed, loses its rows. Task Logs and Run
Requests link to them, and Frappe refuses to delete what is linked, so such rows are kept disabled,
their key cleared ("retired"), and deleted at a later sync once nothing links to them (log retention
removes the Logs). A bad entry (the hook's check refuses it, or a Task's or Schedule's validation refuses its save) is
skipped with one line in the migrate output and the "btu" log, naming the app, the entry and the key; its rows, if
any, stay as they were, and the entries around it sync. Frappe's migrate has no `except` around `after_migrate`: a
raise here would stop `bench migrate --site all` for every later site and every later app's hooks. The entries
skipped are listed in BTU Configuration's status panel (`skipped`). In developer mode, or with the site config's
`btu_fail_on_bad_schedule_hooks`, a bad entry raises instead and nothing changes, so the app's author sees it at once.
"""

from __future__ import annotations

import frappe
from frappe import _
from frappe.utils import cast, cint

from btu.btu_core.messages import input_error
from btu.btu_core.scheduler_link import announce_after_commit
from btu.btu_core.schedules.hook_entries import (
	HOOK,
	SCHEDULE_FIELDS,
	Declared,
	Refused,
	check_each,
	where,
	zone_after,
)  # fmt: skip
from btu.shared import protocol

TASK = "BTU Task"
SCHEDULE = "BTU Task Schedule"
# Set on the documents the sync saves or deletes: the one path allowed to change a declared row's app fields.
FLAG = "from_declared_sync"
SAVEPOINT = "btu_declared_schedules"
ENTRY_SAVEPOINT = "btu_declared_entry"
# Site config: a bad entry fails the migrate (as developer mode does) instead of being skipped.
STRICT_KEY = "btu_fail_on_bad_schedule_hooks"
# frappe.db's global defaults: the entries the last sync of each app skipped, as JSON, for the status panel.
SKIPPED_KEY = "btu_declared_schedules_skipped"
# What stays the admin's on a declared row, as a refused save names it (README: Declaring schedules).
ADMIN_FIELDS = {
	TASK: (
		"Long Description, Task Group, Max Concurrent Runs, Run Only as Worker, alert rules, email recipients and "
		"chained tasks"
	),
	SCHEDULE: (
		"Enabled, Paused, Time Zone, Calendar, skipped runs, Start/End Time, Run Limit, Pause After Failures, "
		"alert rules and email recipients"
	),
}


def sync(declared: dict[str, list] | None = None) -> None:
	"""Make declared rows match the hooks, and remove those of apps no longer installed.

	`declared` maps apps to their hook lists and syncs only those apps (tests, app install); None
	reads every installed app's hook. Every entry is checked before anything is written; a bad one is
	skipped (or, when `strict()`, raised: then nothing changes).
	"""
	installed = frappe.get_installed_apps()
	if declared is None:
		declared = {app: frappe.get_hooks(HOOK, app_name=app) for app in installed}
	checked = {app: check_each(app, entries) for app, entries in declared.items()}
	refused = [bad for _good, refusals in checked.values() for bad in refusals]
	if refused and strict():
		frappe.throw(
			"\n".join(input_error(bad.error) if bad.error else bad.reason for bad in refused),
			title=_("Invalid {0} hook").format(HOOK),
		)
	wanted = {app: good for app, (good, _refusals) in checked.items()}
	frappe.db.savepoint(SAVEPOINT)
	try:
		for items in wanted.values():
			refused += [bad for bad in map(apply, items) if bad]
		for task, schedule in stale_rows(kept_keys(wanted, refused), installed):
			remove(task, schedule)
	except Exception:
		frappe.db.rollback(save_point=SAVEPOINT)
		raise
	for bad in refused:
		skipped_line(bad)
	remember_skipped(list(declared), installed, refused)


def strict() -> bool:
	"""Whether a bad entry fails the sync: developer mode, or the site config's btu_fail_on_bad_schedule_hooks."""
	return bool(cint(frappe.conf.get("developer_mode")) or cint(frappe.conf.get(STRICT_KEY)))


def kept_keys(wanted: dict[str, list[Declared]], refused: list[Refused]) -> dict[str, set[str]]:
	"""Per app, the entry names whose rows stay: those synced and those skipped (an entry with a typo keeps its rows
	and the admin's settings on them until it is fixed). An app with an entry whose name is unknown (or a hook that
	is no list) is left out, as if not synced this time: which of its rows that entry stood for cannot be told."""
	keys = {app: {item.key for item in items} for app, items in wanted.items()}
	for bad in refused:
		if bad.key is None:
			keys.pop(bad.app, None)
		elif bad.app in keys:
			keys[bad.app].add(bad.key)
	return keys


def skipped_line(bad: Refused) -> None:
	"""The one line a skipped entry gets: in the migrate's output and in the "btu" log."""
	line = (
		f"BTU: site {frappe.local.site}: skipped {bad.reason}; the entry's rows, if any, are kept as they were. "
		f"Fix the entry and run bench migrate (developer mode or the site config's {STRICT_KEY} makes a bad entry "
		"fail the migrate)"
	)
	frappe.logger("btu").warning(line)
	print(line)


def remember_skipped(synced: list[str], installed: list[str], refused: list[Refused]) -> None:
	"""Keep the entries this sync skipped beside the earlier syncs' of other apps still installed (`skipped`);
	written only when the list changes, not at every migrate."""
	earlier = skipped()
	rows = [row for row in earlier if row["app"] not in synced and row["app"] in installed]
	rows += [{"app": bad.app, "entry": bad.key, "reason": bad.reason} for bad in refused]
	if rows != earlier:
		frappe.db.set_global(SKIPPED_KEY, frappe.as_json(rows))


def skipped() -> list[dict]:
	"""The `btu_schedules` entries the last syncs skipped: app, entry (None when unknown) and reason."""
	return frappe.parse_json(frappe.db.get_global(SKIPPED_KEY) or "[]")


def app_installed(app: str) -> None:
	"""after_app_install: the new app's schedules, now rather than at the next migrate."""
	sync({app: frappe.get_hooks(HOOK, app_name=app)})


def app_uninstalled(app: str) -> None:
	"""after_app_uninstall: the removed app's rows go (sync removes rows of apps no longer installed).

	Committed here: Frappe's remove_app calls this hook after its own last commit, and `uninstall-app` then closes
	the connection without committing, so uncommitted removals would be rolled back (and the scheduler never told)."""
	sync({})
	frappe.db.commit()


def apply(item: Declared) -> Refused | None:
	"""Create or update the entry's Task, then its Schedule. A save the controllers refuse is undone and returned as
	the entry's refusal (raised when `strict()`), naming the entry."""
	frappe.db.savepoint(ENTRY_SAVEPOINT)
	try:
		task = _declared_doc(TASK, item)
		_write(task, {**item.task, "declared_by_app": item.app, "declared_key": item.key})
		schedule = _declared_doc(SCHEDULE, item)
		zone = (
			item.time_zone
			if schedule.is_new()
			else zone_after(schedule.time_zone, schedule.declared_time_zone, item.time_zone)
		)
		values = {field: None for field in SCHEDULE_FIELDS}  # the Schedule's overrides stay blank: the Task's apply
		values.update(
			item.schedule,
			task=task.name,
			time_zone=zone,
			declared_by_app=item.app,
			declared_key=item.key,
			declared_time_zone=item.time_zone,
		)
		_write(schedule, values)
	except frappe.ValidationError as exc:
		if strict():
			frappe.throw(f"{where(item.app, item.key)}: {exc}", title=_("Invalid {0} hook").format(HOOK))
		frappe.db.rollback(save_point=ENTRY_SAVEPOINT)
		frappe.clear_last_message()  # the controller's message: the skipped line says it, with the entry
		return Refused(item.app, item.key, f"{where(item.app, item.key)}: {exc}")
	return None


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
	"""The fields whose value in `doc` is not the one in `values` (None, "" and 0 alike, as the database stores
	them)."""
	return [field for field, value in values.items() if (doc.get(field) or None) != (value or None)]


def stale_rows(keys: dict[str, set[str]], installed: list[str]) -> list[tuple[str, str | None]]:
	"""(task, schedule) of declared rows no hook wants: entries gone from a synced app's hook (`keys`: the names each
	synced app keeps), apps no longer installed, and rows retired earlier."""
	stale = []
	for task in frappe.get_all(
		TASK, filters={"declared_by_app": ("is", "set")}, fields=["name", "declared_by_app", "declared_key"]
	):
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
			_(
				"{0}: declared_by_app {1} is set only by bench migrate, from that app's {2} hook; leave it empty for "
				"a schedule made here"
			).format(_(doc.doctype), app, HOOK),
			title=_("Declared by app {0}").format(app),
		)
	changed = differing(doc, {field: before.get(field) for field in fields})
	if changed:
		frappe.throw(
			_(
				"{0} {1}: {2} declared by app {3} in its hooks.py; edit its {4} entry there and run bench migrate. "
				"Here you may change {5}"
			).format(_(doc.doctype), doc.name or _("(new)"), ", ".join(changed), app, HOOK, ADMIN_FIELDS[doc.doctype]),
			title=_("Declared by app {0}").format(app),
		)
	if doc.doctype == SCHEDULE and not doc.declared_key and doc.enabled:
		frappe.throw(
			_(
				"{0} {1}: removed from the {2} hook of app {3}; it stays disabled until a bench migrate deletes it"
			).format(_(doc.doctype), doc.name, HOOK, app),
			title=_("Declared by app {0}").format(app),
		)


def check_delete(doc) -> None:
	"""Refuse deleting a declared row by hand: the next migrate would make it again."""
	if doc.get("declared_key") and not doc.flags.get(FLAG):
		frappe.throw(
			_(
				"{0} {1}: declared by app {2} in its hooks.py ({3} entry {4}); remove the entry there and run bench "
				"migrate, or disable or pause the schedule here"
			).format(_(doc.doctype), doc.name, doc.declared_by_app, HOOK, doc.declared_key),
			title=_("Declared by app {0}").format(doc.declared_by_app),
		)


def form_hint(doc, fields: tuple[str, ...]) -> None:
	"""What the form shows of a declared row: the intro, and which fields to make read-only (onload)."""
	if not doc.get("declared_by_app"):
		return
	if doc.declared_key:
		intro = _(
			"Declared by app {0} in hooks.py ({1} entry {2}): edit the hook and run bench migrate to change the "
			"greyed fields."
		).format(doc.declared_by_app, HOOK, doc.declared_key)
	else:
		intro = _(
			"Removed from the {0} hook of app {1}: kept disabled while Task Logs or Run Requests point to it; a later "
			"bench migrate deletes it."
		).format(HOOK, doc.declared_by_app)
	doc.set_onload("btu_declared", {"intro": intro, "fields": list(fields)})
