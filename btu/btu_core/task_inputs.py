"""The inputs of a Task and a Schedule that must hold before anything runs.

Each check raises TaskInputError with a message that names the field, the
value and the fix; controllers turn it into frappe.throw, the task runner
lets it fail the run.
"""

from __future__ import annotations

import importlib
import inspect
import json
from collections.abc import Callable

from btu.shared import declared, task_args


class TaskInputError(ValueError):
	"""A Task or Schedule input that cannot be used; str() says which and how to fix it."""


def parse_arguments(text: str | None, field: str = "arguments") -> dict:
	"""The JSON object in `text` (empty means {}); errors give line and column."""
	try:
		return task_args.parse_arguments(text, field)
	except task_args.ArgumentsError as exc:
		raise TaskInputError(str(exc)) from None


def merge_arguments(task_arguments: str | None, overrides: str | None) -> dict:
	"""The Task's arguments with the Schedule's overrides merged over them (one level)."""
	try:
		return task_args.merge_arguments(task_arguments, overrides)
	except task_args.ArgumentsError as exc:
		raise TaskInputError(str(exc)) from None


def resolve_function(path: str | None) -> Callable:
	"""The function `path` names, if an installed app declares it runnable (btu.shared.declared)."""
	import frappe

	try:
		# Checked before the import: importing a module can itself do things.
		target = declared.target(path, frappe.get_installed_apps())
	except declared.NotRunnable as exc:
		raise TaskInputError(str(exc)) from None
	path = target.path
	try:
		module = importlib.import_module(target.module)
	except ModuleNotFoundError as exc:
		raise TaskInputError(
			f"function_string '{path}': module '{target.module}' cannot be imported ({exc}); "
			"check the spelling and that its app is installed in this bench"
		) from None
	except Exception as exc:
		raise TaskInputError(
			f"function_string '{path}': importing module '{target.module}' raised "
			f"{type(exc).__name__}: {exc}; fix that module"
		) from None
	try:
		function = getattr(module, target.name)
	except AttributeError:
		raise TaskInputError(
			f"function_string '{path}': module '{target.module}' has no attribute '{target.name}'; "
			"check the function's name"
		) from None
	if not callable(function):
		raise TaskInputError(
			f"function_string '{path}': is a {type(function).__name__}, not a function; point it at a function"
		)
	try:
		declared.check_declared(
			target,
			defined_in=function.__module__ if inspect.isfunction(function) else None,
			decorated=getattr(function, declared.MARK, False) is True,
			patterns=frappe.get_hooks(declared.HOOK, app_name=target.app),
			allow_any_app_function=declared.allows_any_app_function(frappe.conf.get(declared.ALLOW_ANY_APP_FUNCTION)),
		)
	except declared.NotRunnable as exc:
		raise TaskInputError(str(exc)) from None
	return function


def check_arguments_fit(function: Callable, path: str, arguments: dict, *, complete: bool) -> None:
	"""Refuse keyword arguments the function does not take; with `complete`, also missing ones."""
	try:
		signature = inspect.signature(function)
	except (TypeError, ValueError):
		return
	try:
		if complete:
			signature.bind(**arguments)
		else:
			signature.bind_partial(**arguments)
	except TypeError as exc:
		raise TaskInputError(
			f"arguments {json.dumps(arguments, default=str)}: do not fit {path}{signature}: {exc}; "
			"change the arguments (or the Schedule's argument_overrides) to match the function"
		) from None


def site_queues() -> list[str]:
	"""The RQ queues this bench's workers consume: short, default, long and `workers` keys."""
	from frappe.utils.background_jobs import get_queues_timeout

	return list(get_queues_timeout())


def check_queue(name: str | None, field: str = "queue_name") -> None:
	queues = site_queues()
	if name not in queues:
		raise TaskInputError(
			f"{field} '{name or ''}': is not a queue of this bench; use one of {', '.join(queues)} "
			"(custom queues come from the `workers` key of common_site_config.json)"
		)
