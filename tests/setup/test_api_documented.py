"""Every whitelisted method of `btu.btu_core.api` is documented in the README by its full path: an admin scripting
BTU over REST finds each one there (its arguments, who may call it), not only by reading the source.

Read from the source with `ast` (tier 1 has no frappe to import it with)."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
API = ROOT / "btu" / "btu_core" / "api.py"
MODULE = "btu.btu_core.api"


def is_whitelist(decorator: ast.expr) -> bool:
	"""`@frappe.whitelist` or `@frappe.whitelist(...)`."""
	target = decorator.func if isinstance(decorator, ast.Call) else decorator
	return isinstance(target, ast.Attribute) and target.attr == "whitelist"


def whitelisted() -> list[str]:
	tree = ast.parse(API.read_text(), str(API))
	return [
		node.name
		for node in tree.body
		if isinstance(node, ast.FunctionDef) and any(map(is_whitelist, node.decorator_list))
	]


def test_every_whitelisted_api_method_is_in_the_readme():
	names = whitelisted()
	assert "run_once_at" in names and len(names) > 10, f"the parse found {names}"
	readme = (ROOT / "README.md").read_text()
	missing = [name for name in names if f"`{MODULE}.{name}`" not in readme]
	assert not missing, (
		f"README.md does not name {', '.join(f'{MODULE}.{name}' for name in missing)}: "
		"add each to its whitelisted API table"
	)
