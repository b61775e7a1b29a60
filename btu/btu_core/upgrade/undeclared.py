"""The Tasks whose function no installed app declares, with the line each needs: live, so a declaration clears it."""

from __future__ import annotations

import importlib
import inspect

import frappe
from frappe import _

from btu.btu_core.messages import input_error
from btu.btu_core.runs.task_inputs import TaskInputError, resolve_function
from btu.btu_core.upgrade.convert.declarations import app_of, hook_line
from btu.btu_core.upgrade.tables import SITE, Tables
from btu.shared import declared


def undeclared(tables: Tables = SITE) -> list[dict]:
	"""Each Task whose `function_string` BTU refuses: its name, function, enabled schedules, the reason and the fix."""
	found = []
	schedules: dict[str, list[str]] = {}
	for name, task in frappe.db.sql(f"select name, task from `{tables.schedule}` where enabled = 1 order by name"):
		schedules.setdefault(task, []).append(name)
	for name, function in frappe.db.sql(f"select name, function_string from `{tables.task}` order by name"):
		try:
			resolve_function(function)
		except TaskInputError as exc:
			app = app_of(function) if declarable(function) else ""
			found.append(
				{
					"task": name,
					"function_string": function,
					"schedules": schedules.get(name, []),
					"reason": fixture_refusal(function) or str(exc),
					"hook_line": hook_line(function) if app else "",
					"hooks_file": f"{app}/hooks.py" if app else "",
				}
			)
	return found


def fixture_refusal(path: str | None) -> str | None:
	"""Why a production site refuses `path` when it is a function of an app's tests: no declaration helps that."""
	try:
		target = declared.target(path, frappe.get_installed_apps())
	except declared.NotRunnable:
		return None
	try:
		declared.check_not_a_test_fixture(target, allow_tests=False)
	except declared.NotRunnable as exc:
		return input_error(exc)
	return None


def declarable(path: str | None) -> bool:
	"""Whether a declaration would do: `path` is a function defined in a module of an installed app (not one gone
	with the original BTU, nor one imported into the module it names), outside the app's tests."""
	try:
		target = declared.target(path, frappe.get_installed_apps())
		if declared.is_test_module(target.module):
			return False
		function = getattr(importlib.import_module(target.module), target.name)
	except Exception:
		return False
	return inspect.isfunction(function) and function.__module__ == target.module


def print_report(tasks: list[dict]) -> None:
	"""One line per Task whose function is not declared, and the command that writes the declarations."""
	for task in tasks:
		fix = (
			_(
				"add to {0}: {1} (if that app is not yours, put a @runnable function in your app that calls it, and "
				"point the Task there)"
			).format(task["hooks_file"], task["hook_line"])
			if task["hook_line"]
			else task["reason"]
		)
		print(
			_("BTU upgrade: BTU Task {0} runs {1}, which no app declares (schedules {2}): {3}").format(
				task["task"], task["function_string"], ", ".join(task["schedules"]) or "-", fix
			)
		)
	if tasks:
		print(
			_(
				"BTU upgrade: bench --site {0} btu-declare-tasks --app <your app> prints (or, with --write, appends) "
				"the btu_tasks block of that app's own functions"
			).format(frappe.local.site)
		)
