"""btu.shared.declared: the rules both halves check a Task's function against, with hostile paths."""

from __future__ import annotations

import inspect
import os
import subprocess

import pytest

from btu import runnable
from btu.shared.declared import NotRunnable, Target, check_declared, config_flag, target

pytestmark = pytest.mark.versions

APPS = ["frappe", "btu", "myapp"]


def facts(function) -> dict:
	"""What the Frappe side reads off an imported object."""
	return {
		"defined_in": function.__module__ if inspect.isfunction(function) else None,
		"decorated": getattr(function, "__btu_runnable__", False) is True,
	}


@pytest.mark.parametrize(
	"path",
	["os.system", "subprocess.getoutput", "builtins.eval", "posix.system", "importlib.import_module",
	 "btu_evil.tasks.run", "frappex.utils.run", "myapp_evil.tasks.run", "BTU.tasks.run",
	 "frappe.utils.execute_in_shell"],
)  # fmt: skip
def test_a_path_outside_the_installed_apps_is_refused_before_any_import(path):
	apps = [app for app in APPS if app != "frappe"] if path.startswith("frappe.") else APPS
	with pytest.raises(NotRunnable) as caught:
		target(path, apps)
	message = str(caught.value)
	assert f"function_string '{path}'" in message
	assert f"'{path.split('.')[0]}' is not an installed app" in message
	assert "declare it" in message


@pytest.mark.parametrize(
	"path",
	["", "   ", "btu", "btu..tasks.run", ".btu.tasks.run", "btu.tasks.run.", "btu/../os.system", "../btu.x",
	 "btu.tasks.run()", "btu.tasks.run x", "btu.tasks.1run", "btu.tasks-x.run",
	 "bt\u0443.tasks.run",  # Cyrillic u
	 "\uff42\uff54\uff55.tasks.run",  # fullwidth "btu", which NFKC would make "btu"
	 "btu.tasks.\u0455ay_hello",  # Cyrillic dze for "s"
	 "btu.tasks.run\u200b",  # zero-width space
	 None],
)  # fmt: skip
def test_a_malformed_or_look_alike_path_is_refused(path):
	with pytest.raises(NotRunnable) as caught:
		target(path, APPS)
	assert "dotted path of ASCII identifiers" in str(caught.value)


def test_a_path_splits_into_app_module_and_name():
	assert target(" myapp.tasks.nightly.run ", APPS) == Target(
		"myapp.tasks.nightly.run", "myapp", "myapp.tasks.nightly", "run"
	)


def test_an_imported_function_is_refused_even_where_a_glob_matches_its_name():
	# myapp/tasks.py did `from subprocess import getoutput`: myapp.tasks.getoutput is subprocess's.
	with pytest.raises(NotRunnable) as caught:
		check_declared(
			target("myapp.tasks.getoutput", APPS),
			**facts(subprocess.getoutput),
			patterns=["myapp.tasks.*", "*"],
			allow_any_app_function=True,
		)
	assert "is defined in subprocess and only imported into myapp.tasks" in str(caught.value)


def test_a_builtin_or_class_is_not_a_function():
	for thing in (os.system, eval, subprocess.Popen):
		with pytest.raises(NotRunnable) as caught:
			check_declared(
				target("myapp.tasks.thing", APPS), **facts(thing), patterns=["*"], allow_any_app_function=True
			)
		assert "is not a function defined with def in myapp.tasks" in str(caught.value)


def test_an_undeclared_function_is_refused_with_how_to_declare_it():
	with pytest.raises(NotRunnable) as caught:
		check_declared(
			target("myapp.tasks.send_reminders", APPS), defined_in="myapp.tasks", decorated=False,
			patterns=["myapp.tasks.send_*x", "myapp.other.*"], allow_any_app_function=False,
		)  # fmt: skip
	message = str(caught.value)
	assert "function_string 'myapp.tasks.send_reminders': is not declared runnable by BTU" in message
	assert 'btu_tasks = ["myapp.tasks.send_reminders"]' in message and "myapp/hooks.py" in message
	assert "@runnable (from btu import runnable) above def send_reminders in myapp/tasks.py" in message


@pytest.mark.parametrize(
	"patterns",
	[
		["myapp.tasks.send_reminders"],
		["myapp.tasks.*"],
		["myapp.*"],
		"myapp.tasks.send_*",
		[" myapp.tasks.send_reminders "],
	],
)
def test_a_hook_pattern_declares(patterns):
	check_declared(
		target("myapp.tasks.send_reminders", APPS),
		defined_in="myapp.tasks",
		decorated=False,
		patterns=patterns,
		allow_any_app_function=False,
	)


def test_patterns_are_case_sensitive():
	with pytest.raises(NotRunnable):
		check_declared(
			target("myapp.tasks.Run", APPS),
			defined_in="myapp.tasks",
			decorated=False,
			patterns=["myapp.tasks.run"],
			allow_any_app_function=False,
		)


def test_a_pattern_that_is_not_a_string_is_named():
	with pytest.raises(NotRunnable) as caught:
		check_declared(
			target("myapp.tasks.run", APPS),
			defined_in="myapp.tasks",
			decorated=False,
			patterns=[42],
			allow_any_app_function=False,
		)
	assert "function_string 'myapp.tasks.run': btu_tasks in myapp/hooks.py holds 42, not a string" in str(caught.value)


def test_the_decorator_declares_and_returns_the_function_itself():
	def nightly():
		return "ran"

	assert runnable(nightly) is nightly and nightly() == "ran"
	assert facts(nightly)["decorated"]
	check_declared(
		target("myapp.tasks.nightly", APPS),
		defined_in="myapp.tasks",
		decorated=True,
		patterns=[],
		allow_any_app_function=False,
	)


@pytest.mark.parametrize("thing", [os.system, subprocess.Popen, print, 42])
def test_the_decorator_takes_only_functions(thing):
	with pytest.raises(TypeError, match="@runnable decorates a function defined with def"):
		runnable(thing)


def test_the_escape_hatch_lifts_only_the_declaration():
	check_declared(
		target("myapp.tasks.run", APPS),
		defined_in="myapp.tasks",
		decorated=False,
		patterns=[],
		allow_any_app_function=True,
	)
	with pytest.raises(NotRunnable):
		target("os.system", APPS)
	with pytest.raises(NotRunnable, match="only imported"):
		check_declared(
			target("myapp.tasks.system", APPS),
			defined_in="os",
			decorated=False,
			patterns=[],
			allow_any_app_function=True,
		)


@pytest.mark.parametrize(
	"value, on",
	[(True, True), (1, True), ("1", True), ("true", True), (" True ", True),
	 (None, False), (False, False), (0, False), ("0", False), ("false", False),
	 ("", False), ("no", False), ({}, False)],
)  # fmt: skip
def test_the_escape_hatch_is_on_only_for_true_or_1(value, on):
	assert config_flag(value) is on
