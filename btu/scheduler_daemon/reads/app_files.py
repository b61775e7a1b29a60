"""Which functions a bench's apps declare runnable (btu.shared.declared), read from their files.

The rq executor's jobs call a Task's function directly, so the scheduler
refuses an undeclared one before it builds a job; it never imports app code.
The layout is bench's: ``sites/apps.txt`` lists the installed apps,
``apps/<app>/<app>/`` is an app's package, ``hooks.py`` in it holds
``btu_tasks`` (read as a literal, never run), and a module is
``<module path>.py`` or ``<module path>/__init__.py`` under ``apps/<app>/``.
A function is defined by a top-level ``def`` (the last binding of its name);
``@runnable`` or ``@btu.runnable`` on it declares it.
"""

from __future__ import annotations

import ast
from functools import cached_property
from pathlib import Path

from btu.shared import declared
from btu.shared.declared import NotRunnable
from btu.shared.messages import _


def read_apps(path: Path) -> list[str]:
	"""The apps of `path` (sites/apps.txt), one a line, as Frappe reads them."""
	try:
		return [line.strip() for line in path.read_text().splitlines() if line.strip()]
	except FileNotFoundError:
		return []


class AppFiles:
	"""The installed apps of the bench at `bench_path` and what they declare runnable."""

	def __init__(self, bench_path: Path, allow_any_app_function: bool):
		self.apps_path = Path(bench_path) / "apps"
		self.apps_txt = Path(bench_path) / "sites" / "apps.txt"
		self.allow_any_app_function = allow_any_app_function
		self.apps = read_apps(self.apps_txt)
		self.checked: dict[str, NotRunnable | None] = {}  # path -> why it is refused, None if runnable
		self.modules: dict[str, dict[str, tuple[str, object]]] = {}
		self.patterns: dict[str, object] = {}  # app -> its btu_tasks, None if hooks.py does not write it as a literal

	@cached_property
	def fingerprint(self) -> str:
		"""Changes when an app, a hooks.py or the escape hatch does, so schedules are compiled again."""
		parts = [str(self.allow_any_app_function), *self.apps]
		for app in self.apps:
			try:
				stat = (self.package(app) / "hooks.py").stat()
				parts.append(f"{stat.st_mtime_ns}:{stat.st_size}")
			except OSError:
				parts.append("-")
		return "/".join(parts)

	def check(self, path: str, *, allow_tests: bool = False) -> None:
		"""Raise NotRunnable (naming the function and how to declare it) unless `path` may run on a site that does
		(`allow_tests`) or does not run tests."""
		if path not in self.checked:
			try:
				self.check_files(path)
				self.checked[path] = None
			except NotRunnable as exc:
				self.checked[path] = exc
		refusal = self.checked[path]
		if refusal is not None:
			# Without its last traceback: raised again at every check, it would keep each one.
			raise refusal.with_traceback(None)
		declared.check_not_a_test_fixture(declared.target(path, self.apps), allow_tests=allow_tests)

	def check_files(self, path: str) -> None:
		target = declared.target(path, self.apps)
		kind, detail = self.bindings(target).get(target.name, ("missing", None))
		if kind == "missing":
			raise NotRunnable(
				"function_string",
				target.path,
				_("{file} defines no {name}; check the function's name"),
				file=self.module_file(target),
				name=target.name,
			)
		decorated = kind == "def" and detail is True
		# hooks.py is read only when it decides: a broken one must not refuse a decorated function.
		needs_hook = kind == "def" and not decorated and not self.allow_any_app_function
		declared.check_declared(
			target,
			defined_in=target.module if kind == "def" else detail if kind == "import" else None,
			decorated=decorated,
			patterns=self.hook_patterns(target) if needs_hook else [],
			allow_any_app_function=self.allow_any_app_function,
		)

	def package(self, app: str) -> Path:
		return self.apps_path / app / app

	def module_file(self, target: declared.Target) -> Path:
		"""The file of `target`'s module; every segment is an identifier, so it stays under apps/<app>/."""
		base = self.apps_path / target.app / target.module.replace(".", "/")
		for candidate in (base.with_suffix(".py"), base / "__init__.py"):
			if candidate.is_file():
				return candidate
		if not self.package(target.app).is_dir():
			raise NotRunnable(
				"function_string",
				target.path,
				_(
					"app {app} is listed in {apps_txt} but {package} does not exist; "
					"get the app into apps/ (bench get-app)"
				),
				app=target.app,
				apps_txt=self.apps_txt,
				package=self.package(target.app),
			)
		raise NotRunnable(
			"function_string",
			target.path,
			_("module '{module}' has no file {base}.py or {base}/__init__.py; check the spelling"),
			module=target.module,
			base=base,
		)

	def bindings(self, target: declared.Target) -> dict[str, tuple[str, object]]:
		"""Top-level name -> ("def", decorated) | ("import", source module) | ("other", None), the last binding wins."""
		if target.module not in self.modules:
			path = self.module_file(target)
			tree = parse(path, target.path)
			package = target.module if path.name == "__init__.py" else target.module.rpartition(".")[0]
			names: dict[str, tuple[str, object]] = {}
			for node in tree.body:
				if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
					names[node.name] = ("def", any(is_runnable(d) for d in node.decorator_list))
				elif isinstance(node, ast.ImportFrom):
					source = imported_module(node, package)
					for alias in node.names:
						names[alias.asname or alias.name] = ("import", source)
				else:
					for name in bound_names(node):
						names[name] = ("other", None)
			self.modules[target.module] = names
		return self.modules[target.module]

	def hook_patterns(self, target: declared.Target):
		"""The literal `btu_tasks` of the app's hooks.py ([] without one)."""
		if target.app not in self.patterns:
			path = self.package(target.app) / "hooks.py"
			value: object = []
			if path.is_file():
				for node in parse(path, target.path).body:
					if declared.HOOK in bound_names(node):
						try:
							value = (
								ast.literal_eval(node.value) if isinstance(node, (ast.Assign, ast.AnnAssign)) else None
							)
						except (ValueError, TypeError, RecursionError):
							value = None
				if not isinstance(value, (str, list, tuple)):
					value = None
			self.patterns[target.app] = value
		value = self.patterns[target.app]
		if value is None:
			raise NotRunnable(
				"function_string",
				target.path,
				_(
					"btu_tasks in {hooks} must be a literal list of strings "
					"(the scheduler reads hooks.py without running it); "
					'write it as btu_tasks = ["{app}.tasks.*"]'
				),
				hooks=self.package(target.app) / "hooks.py",
				app=target.app,
			)
		return value


def parse(path: Path, function_path: str) -> ast.Module:
	try:
		return ast.parse(path.read_bytes(), filename=str(path))
	except (SyntaxError, ValueError, OSError) as exc:
		raise NotRunnable(
			"function_string",
			function_path,
			_("{file} cannot be read as Python ({error}); fix that file"),
			file=path,
			error=exc,
		) from None


def is_runnable(decorator: ast.expr) -> bool:
	"""`@runnable` or `@btu.runnable`."""
	if isinstance(decorator, ast.Name):
		return decorator.id == "runnable"
	return (
		isinstance(decorator, ast.Attribute)
		and decorator.attr == "runnable"
		and isinstance(decorator.value, ast.Name)
		and decorator.value.id == "btu"
	)


def imported_module(node: ast.ImportFrom, package: str) -> str:
	"""The absolute name of the module `from ... import` reads."""
	if not node.level:
		return node.module or ""
	base = package.split(".")
	base = base[: len(base) - (node.level - 1)] if node.level > 1 else base
	return ".".join([*base, *([node.module] if node.module else [])])


def bound_names(node: ast.stmt) -> list[str]:
	"""The top-level names a statement (other than def and from-import) binds."""
	if isinstance(node, ast.ClassDef):
		return [node.name]
	if isinstance(node, ast.Import):
		return [(alias.asname or alias.name).split(".")[0] for alias in node.names]
	targets: list[ast.expr] = []
	if isinstance(node, ast.Assign):
		targets = node.targets
	elif isinstance(node, (ast.AnnAssign, ast.AugAssign)):
		targets = [node.target]
	names = []
	for target in targets:
		names += [n.id for n in ast.walk(target) if isinstance(n, ast.Name)]
	return names
