"""`bench btu-declare-tasks`: the btu_tasks block an app writes for the Tasks the original BTU ran undeclared."""

from __future__ import annotations

import ast
from pathlib import Path

import frappe

from btu.btu_core.upgrade.convert.declarations import app_of, hooks_block
from btu.btu_core.upgrade.undeclared import undeclared
from btu.shared.declared import HOOK

# Apps whose hooks.py is not the site's to edit: the next `bench update` replaces it, and a declaration there would
# declare the function for every site of every bench that installs the app.
NOT_YOURS = ("frappe", "btu")


def declare(app: str, *, write: bool) -> int:
	"""Print (or append to `app`'s hooks.py) the block; list the Tasks it cannot cover. 1 when `app` is not installed,
	is not the site's own (NOT_YOURS), or its hooks.py already assigns btu_tasks (edit that list by hand), else 0."""
	if app not in frappe.get_installed_apps():
		print(
			f"btu-declare-tasks: {app} is not installed on {frappe.local.site}; name one of "
			f"{', '.join(frappe.get_installed_apps())}"
		)
		return 1
	tasks = undeclared()
	if app in NOT_YOURS:
		print(
			f"btu-declare-tasks: {app}'s hooks.py is not yours to edit (bench update replaces it); name your own app: "
			f"put a @runnable function in it that calls the one a Task names, and point the Task at it"
		)
		for task in tasks:
			print(f"# BTU Task {task['task']} runs {task['function_string']}, which no app declares")
		return 1
	block = hooks_block(app, [t["function_string"] for t in tasks if t["hook_line"]])
	own_undeclarable = 0
	for task in tasks:
		if app_of(task["function_string"]) != app:
			where = f"add to {task['hooks_file']}: {task['hook_line']}" if task["hook_line"] else task["reason"]
			print(f"# not {app}'s: BTU Task {task['task']} runs {task['function_string']}: {where}")
		elif not task["hook_line"]:
			own_undeclarable += 1
			print(f"# {app}'s, but no declaration makes it run: BTU Task {task['task']}: {task['reason']}")
	if not block:
		print(
			f"# none of {app}'s functions a Task runs can be declared (above)"
			if own_undeclarable
			else f"# no undeclared function of {app}"
		)
		return 0
	hooks = Path(frappe.get_app_path(app, "hooks.py"))
	if not write:
		print(block, end="")
		return 0
	if assigns_hook(hooks.read_text()):
		print(f"btu-declare-tasks: {hooks} already assigns {HOOK}; add these entries to it by hand:\n{block}", end="")
		return 1
	with hooks.open("a") as out:
		out.write("\n" + block)
	print(
		f"btu-declare-tasks: appended {HOOK} to {hooks}; restart the bench (or bench btu-scheduler resync) for it to "
		"count"
	)
	return 0


def assigns_hook(source: str) -> bool:
	"""Whether hooks.py assigns btu_tasks at module level (a second assignment would hide the first)."""
	return any(
		isinstance(node, (ast.Assign, ast.AnnAssign))
		and any(
			getattr(t, "id", None) == HOOK for t in (node.targets if isinstance(node, ast.Assign) else [node.target])
		)
		for node in ast.parse(source).body
	)
