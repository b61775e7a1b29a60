"""The shape of the package (docs/ARCHITECTURE.md): who may import whom, and how large a unit may grow.

Read from the source with `ast`, so an import inside a function counts as much as one at the top.
"""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.versions

BTU = Path(__file__).resolve().parents[2] / "btu"
# package -> what it must never import (a name, or a prefix followed by ".")
FORBIDDEN = {
	"shared": ("frappe", "btu.scheduler_daemon", "btu.btu_core", "btu.devbench"),
	"scheduler_daemon": ("frappe", "btu.btu_core"),
	"devbench": ("frappe", "btu.btu_core"),
	"btu_core": ("btu.scheduler_daemon", "btu.devbench"),  # its tests aside: the end-to-end test runs the scheduler
}
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


@pytest.mark.parametrize("package", FORBIDDEN)
def test_package_imports_stay_inside_its_boundary(package):
	found = []
	for path in modules(package):
		for name in imported(path):
			if any(name == bad or name.startswith(bad + ".") for bad in FORBIDDEN[package]):
				found.append(f"{path.relative_to(BTU.parent)} imports {name}")
	assert not found, "\n".join(found)


def test_importing_the_scheduler_loads_no_frappe():
	code = (
		"import sys, pkgutil, importlib, btu.scheduler_daemon, btu.shared, btu.devbench\n"
		"for package in (btu.scheduler_daemon, btu.shared, btu.devbench):\n"
		"    for info in pkgutil.walk_packages(package.__path__, package.__name__ + '.'):\n"
		"        if not info.name.endswith('.__main__'):  # runs the CLI\n"
		"            importlib.import_module(info.name)\n"
		"print(sorted(m for m in sys.modules if m == 'frappe' or m.startswith(('frappe.', 'btu.btu_core'))))\n"
	)
	out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
	assert out.strip() == "[]"


def test_no_function_or_class_outgrows_one_screen_of_reading():
	found = []
	for path in sorted(BTU.rglob("*.py")):
		for node in ast.walk(ast.parse(path.read_text(), str(path))):
			if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
				lines = node.end_lineno - node.lineno + 1
				limit = MAX_CLASS_LINES if isinstance(node, ast.ClassDef) else MAX_FUNCTION_LINES
				if lines > limit:
					found.append(f"{path.relative_to(BTU.parent)}:{node.lineno} {node.name}: {lines} lines (limit {limit})")
	assert not found, "\n".join(found)
