"""The inputs of a Task and a Schedule that must hold before anything runs.

Each check raises TaskInputError with a message, in the user's language, that
names the field, the value and the fix; controllers turn it into frappe.throw,
the task runner lets it fail the run.
"""

from __future__ import annotations

import importlib
import inspect
import json
from collections.abc import Callable

import frappe
from frappe import _

from btu.btu_core.messages import input_error
from btu.shared import declared, task_args


class TaskInputError(ValueError):
	"""A Task or Schedule input that cannot be used; str() says which and how to fix it, translated."""


def parse_arguments(text: str | None, field: str = "arguments") -> dict:
	"""The JSON object in `text` (empty means {}); errors give line and column."""
	try:
		return task_args.parse_arguments(text, field)
	except task_args.ArgumentsError as exc:
		raise TaskInputError(input_error(exc)) from None


def merge_arguments(task_arguments: str | None, overrides: str | None) -> dict:
	"""The Task's arguments with the Schedule's overrides merged over them (one level)."""
	try:
		return task_args.merge_arguments(task_arguments, overrides)
	except task_args.ArgumentsError as exc:
		raise TaskInputError(input_error(exc)) from None


def resolve_function(path: str | None, field: str = "function_string") -> Callable:
	"""The function `path` names, if an installed app declares it runnable (btu.shared.declared); errors name
	`field`."""
	try:
		# Checked before the import: importing a module can itself do things.
		target = declared.target(path, frappe.get_installed_apps())
	except declared.NotRunnable as exc:
		raise TaskInputError(input_error(exc, field)) from None
	path = target.path
	try:
		module = importlib.import_module(target.module)
	except ModuleNotFoundError as exc:
		raise TaskInputError(
			_(
				"{0} '{1}': module '{2}' cannot be imported ({3}); check the spelling and that its app is installed "
				"in this bench"
			).format(field, path, target.module, exc)
		) from None
	except Exception as exc:
		raise TaskInputError(
			_("{0} '{1}': importing module '{2}' raised {3}: {4}; fix that module").format(
				field, path, target.module, type(exc).__name__, exc
			)
		) from None
	try:
		function = getattr(module, target.name)
	except AttributeError:
		raise TaskInputError(
			_("{0} '{1}': module '{2}' has no attribute '{3}'; check the function's name").format(
				field, path, target.module, target.name
			)
		) from None
	if not callable(function):
		raise TaskInputError(
			_("{0} '{1}': is a {2}, not a function; point it at a function").format(
				field, path, type(function).__name__
			)
		)
	try:
		declared.check_declared(
			target,
			defined_in=function.__module__ if inspect.isfunction(function) else None,
			decorated=getattr(function, declared.MARK, False) is True,
			patterns=frappe.get_hooks(declared.HOOK, app_name=target.app),
			allow_any_app_function=declared.config_flag(frappe.conf.get(declared.ALLOW_ANY_APP_FUNCTION)),
		)
		declared.check_not_a_test_fixture(
			target, allow_tests=declared.config_flag(frappe.conf.get(declared.ALLOW_TESTS))
		)
	except declared.NotRunnable as exc:
		raise TaskInputError(input_error(exc, field)) from None
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
			_(
				"arguments {0}: do not fit {1}{2}: {3}; change the arguments (or the Schedule's argument_overrides) "
				"to match the function"
			).format(json.dumps(arguments, default=str), path, signature, exc)
		) from None


def site_queues() -> list[str]:
	"""The RQ queues this bench's workers consume: short, default, long and `workers` keys."""
	from frappe.utils.background_jobs import get_queues_timeout

	return list(get_queues_timeout())


def check_queue(name: str | None, field: str = "queue_name") -> None:
	queues = site_queues()
	if name not in queues:
		raise TaskInputError(
			_(
				"{0} '{1}': is not a queue of this bench; use one of {2} "
				"(custom queues come from the `workers` key of common_site_config.json)"
			).format(field, name or "", ", ".join(queues))
		)
