"""Which functions BTU runs: only those an installed app declares runnable.

A Task names its function by a dotted path, and whoever can save a Task must
not be able to point it at `os.system`. A path is runnable when

1. its first segment is exactly an installed app (not `os`, not `btu_evil`),
2. it names a function defined in that very module, not one imported into it,
3. the app declares it: `@runnable` on the function, or the path matches a
   glob of the `btu_tasks` list in the app's hooks.py (only the app's own
   hooks count for its own functions).

`btu_allow_any_app_function` set in site_config.json or common_site_config.json
lifts rule 3 (rules 1 and 2 stay): for single-tenant benches only.

A function of an app's test modules (a `tests` package, a `test_*` module) runs
only on a site whose config sets `allow_tests`, as Frappe's run-tests needs:
test fixtures ship inside the app's package but must not run in production,
whatever declares them.

Both halves check with this module: the Frappe side after importing the
function (btu.btu_core.runs.task_inputs), the scheduler from the app's files,
without importing them (btu.scheduler_daemon.reads.app_files). It imports nothing
but the standard library and the shared messages (btu.shared.messages).
"""

from __future__ import annotations

import inspect
import re
from dataclasses import dataclass
from fnmatch import fnmatchcase

from btu.shared.messages import InputError, _

HOOK = "btu_tasks"
ALLOW_ANY_APP_FUNCTION = "btu_allow_any_app_function"
ALLOW_TESTS = "allow_tests"  # Frappe's own: run-tests refuses a site without it
MARK = "__btu_runnable__"
# ASCII only: a look-alike letter (Cyrillic "у" in "btу") must not pass for an app's name.
IDENTIFIER = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")


def runnable(function):
	"""Declare `function` runnable as a BTU Task: `from btu import runnable`, then `@runnable` above its def."""
	if not inspect.isfunction(function):
		raise TypeError(f"@runnable decorates a function defined with def, not {function!r}")
	setattr(function, MARK, True)
	return function


def config_flag(value) -> bool:
	"""A config value that switches a check off (`btu_allow_any_app_function`, `allow_tests`) read strictly: on only
	for true or 1.

	`bench set-config btu_allow_any_app_function 0` stores the string "0", which must stay off.
	"""
	return str(value).strip().lower() in ("1", "true")


class NotRunnable(InputError):
	"""A function BTU must not run; str() names it and how to declare it: "function_string 'os.system': ..."."""


@dataclass(frozen=True)
class Target:
	"""A function path split into its app, its module and its name."""

	path: str
	app: str
	module: str
	name: str

	@property
	def module_file(self) -> str:
		return self.module.replace(".", "/") + ".py"


def target(path: str | None, installed_apps) -> Target:
	"""`path` split, if it is a dotted path into an installed app; checked before anything is imported."""
	path = (path or "").strip()
	parts = path.split(".")
	if len(parts) < 2 or not all(IDENTIFIER.match(part) for part in parts):
		raise NotRunnable(
			"function_string",
			path,
			_(
				"must be a dotted path of ASCII identifiers to a module-level function of an installed app, "
				"e.g. myapp.tasks.send_reminders"
			),
		)
	apps = list(installed_apps)
	if parts[0] not in apps:
		raise NotRunnable(
			"function_string",
			path,
			_(
				"'{app}' is not an installed app ({apps}); BTU runs only functions of installed apps that declare them "
				"runnable: write the task as a function in a module of your app, e.g. myapp/tasks.py, and declare it "
				"(@runnable or the btu_tasks hook)"
			),
			app=parts[0],
			apps=", ".join(apps) or "none",
		)
	return Target(path, parts[0], ".".join(parts[:-1]), parts[-1])


def check_declared(
	target: Target, *, defined_in: str | None, decorated: bool, patterns, allow_any_app_function: bool
) -> None:
	"""Refuse `target` unless it is a function defined in its module and its app declares it.

	`defined_in` is the module the function was defined in (None: not a
	function); `patterns` are the app's own `btu_tasks` globs.
	"""
	if defined_in is None:
		raise NotRunnable(
			"function_string",
			target.path,
			_("is not a function defined with def in {module}; point it at such a function"),
			module=target.module,
		)
	if defined_in != target.module:
		raise NotRunnable(
			"function_string",
			target.path,
			_(
				"is defined in {source} and only imported into {module}; BTU runs a function by the path of the module "
				"that defines it, in an app that declares it"
			),
			source=defined_in,
			module=target.module,
		)
	if decorated or allow_any_app_function or matches(target, patterns):
		return
	raise NotRunnable(
		"function_string",
		target.path,
		_(
			'is not declared runnable by BTU; declare it in app {app}: add "{path}" to btu_tasks in {app}/hooks.py '
			'(btu_tasks = ["{path}"]), or put @runnable (from btu import runnable) above def {name} in {module_file}'
		),
		app=target.app,
		path=target.path,
		name=target.name,
		module_file=target.module_file,
	)


def is_test_module(module: str) -> bool:
	"""Whether `module` is in a test package of its app (a `tests` segment) or is a test module (`test_*`)."""
	return any(part == "tests" or part.startswith("test_") for part in module.split(".")[1:])


def check_not_a_test_fixture(target: Target, *, allow_tests: bool) -> None:
	"""Refuse a function of the app's test modules unless the site runs tests (`allow_tests`)."""
	if allow_tests or not is_test_module(target.module):
		return
	raise NotRunnable(
		"function_string",
		target.path,
		_(
			"is in {module}, a test module of app {app}, which BTU runs only on a site whose config sets allow_tests "
			"(a test site: bench --site SITE set-config allow_tests true); point the Task at a function outside the "
			"app's tests"
		),
		module=target.module,
		app=target.app,
	)


def matches(target: Target, patterns) -> bool:
	"""Whether a glob of the app's `btu_tasks` matches the path (a single string counts as a list of one)."""
	if isinstance(patterns, str):
		patterns = [patterns]
	for pattern in patterns or ():
		if not isinstance(pattern, str):
			raise NotRunnable(
				"function_string",
				target.path,
				_(
					"btu_tasks in {app}/hooks.py holds {pattern!r}, not a string; write dotted paths or globs, "
					'e.g. btu_tasks = ["myapp.tasks.*"]'
				),
				app=target.app,
				pattern=pattern,
			)
		if fnmatchcase(target.path, pattern.strip()):
			return True
	return False
