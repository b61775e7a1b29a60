"""The shape of the package (docs/ARCHITECTURE.md): who may import whom, and how large a unit may grow.

Read from the source with `ast`, so an import inside a function counts as much as one at the top. The dev
tooling (`devbench/` at the repository's root, with its own app `btu_demo`) is not part of the product:
nothing in `btu` imports it and btu's hooks.py declares nothing of it.
"""

from __future__ import annotations

import ast
import subprocess
import sys
from fnmatch import fnmatchcase
from pathlib import Path

import pytest

pytestmark = pytest.mark.versions

REPO = Path(__file__).resolve().parents[2]
BTU = REPO / "btu"
DEVBENCH = REPO / "devbench"
# The dev tooling's top-level names: the dev bench package and the dev bench's own app (devbench/apps/btu_demo).
DEV_TOOLING = ("devbench", "btu_demo", "btu.devbench")
# package -> what it must never import (a name, or a prefix followed by ".")
FORBIDDEN = {
	"shared": ("frappe", "btu.scheduler_daemon", "btu.btu_core", *DEV_TOOLING),
	"scheduler_daemon": ("frappe", "btu.btu_core", *DEV_TOOLING),
	"btu_core": ("btu.scheduler_daemon", *DEV_TOOLING),  # its tests aside: the end-to-end test runs the scheduler
}
# The dev tooling runs without Frappe too (tier 1, the demo): it makes BTU's tables from the DocType JSON.
DEVBENCH_FORBIDDEN = ("frappe", "btu.btu_core")
MAX_FUNCTION_LINES = 60
MAX_CLASS_LINES = 300


def modules(package: str) -> list[Path]:
	return sorted(path for path in (BTU / package).rglob("*.py") if "tests" not in path.relative_to(BTU).parts)


def imported(path: Path) -> set[str]:
	names = set()
	for node in ast.walk(ast.parse(path.read_text(), str(path))):
		if isinstance(node, ast.Import):
			names.update(alias.name for alias in node.names)
		elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
			names.add(node.module)
			names.update(f"{node.module}.{alias.name}" for alias in node.names)
	return names


def forbidden_imports(paths, forbidden) -> list[str]:
	found = []
	for path in paths:
		for name in imported(path):
			if any(name == bad or name.startswith(bad + ".") for bad in forbidden):
				found.append(f"{path.relative_to(REPO)} imports {name}")
	return found


@pytest.mark.parametrize("package", FORBIDDEN)
def test_package_imports_stay_inside_its_boundary(package):
	found = forbidden_imports(modules(package), FORBIDDEN[package])
	assert not found, "\n".join(found)


def test_no_module_of_btu_imports_the_dev_tooling():
	# Every file of the package, its tests, hooks.py and commands.py included: the product's import graph ends in btu.
	assert not (BTU / "devbench").exists(), "the dev bench lives at the repository's root, outside the product"
	found = forbidden_imports(sorted(BTU.rglob("*.py")), DEV_TOOLING)
	assert not found, "\n".join(found)


def test_the_dev_tooling_imports_no_frappe():
	found = forbidden_imports(sorted(DEVBENCH.rglob("*.py")), DEVBENCH_FORBIDDEN)
	assert not found, "\n".join(found)


def test_setup_installs_no_dev_tooling():
	# setup.py's packages=find_packages(include=[...]): its patterns (fnmatch, as setuptools reads them) take btu only.
	tree = ast.parse((REPO / "setup.py").read_text())
	(call,) = [node.value for node in ast.walk(tree) if isinstance(node, ast.keyword) and node.arg == "packages"]
	assert isinstance(call, ast.Call) and ast.unparse(call.func) == "find_packages"
	(include,) = [ast.literal_eval(keyword.value) for keyword in call.keywords if keyword.arg == "include"]
	assert any(fnmatchcase("btu.scheduler_daemon", pattern) for pattern in include)
	for name in ("devbench", "devbench.bench", "btu_demo"):
		assert not any(fnmatchcase(name, pattern) for pattern in include), name


def test_production_hooks_declare_nothing_of_the_dev_tooling():
	tree = ast.parse((BTU / "hooks.py").read_text())
	strings = [node.value for node in ast.walk(tree) if isinstance(node, ast.Constant) and isinstance(node.value, str)]
	named = [text for text in strings if any(text == name or text.startswith(name + ".") for name in DEV_TOOLING)]
	assert not named, f"btu/hooks.py names the dev tooling: {named}"
	# Every btu_tasks entry is a module of the product that exists: no stale glob declares a moved-out module.
	(tasks,) = [node.value for node in tree.body if isinstance(node, ast.Assign) and ast.unparse(node.targets[0]) == "btu_tasks"]
	for entry in ast.literal_eval(tasks):
		module = entry.rsplit(".", 1)[0] if not entry.endswith(".*") else entry[: -len(".*")]
		base = REPO / module.replace(".", "/")
		assert module.startswith("btu.") and (base.with_suffix(".py").is_file() or (base / "__init__.py").is_file()), entry


def test_importing_the_scheduler_loads_no_frappe_and_no_dev_tooling():
	code = (
		"import sys, pkgutil, importlib, btu.scheduler_daemon, btu.shared\n"
		"def load(*packages):\n"
		"    for package in packages:\n"
		"        for info in pkgutil.walk_packages(package.__path__, package.__name__ + '.'):\n"
		"            if not info.name.endswith('.__main__'):  # runs the CLI\n"
		"                importlib.import_module(info.name)\n"
		"load(btu.scheduler_daemon, btu.shared)\n"
		"print(sorted(m for m in sys.modules if m.split('.')[0] in ('devbench', 'btu_demo')))\n"
		"import devbench\n"
		"load(devbench)\n"
		"print(sorted(m for m in sys.modules if m == 'frappe' or m.startswith(('frappe.', 'btu.btu_core'))))\n"
	)
	out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=REPO).stdout
	assert out.split("\n")[:2] == ["[]", "[]"], out


def test_no_function_or_class_outgrows_one_screen_of_reading():
	found = []
	for path in sorted([*BTU.rglob("*.py"), *DEVBENCH.rglob("*.py")]):
		for node in ast.walk(ast.parse(path.read_text(), str(path))):
			if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
				lines = node.end_lineno - node.lineno + 1
				limit = MAX_CLASS_LINES if isinstance(node, ast.ClassDef) else MAX_FUNCTION_LINES
				if lines > limit:
					found.append(f"{path.relative_to(REPO)}:{node.lineno} {node.name}: {lines} lines (limit {limit})")
	assert not found, "\n".join(found)
