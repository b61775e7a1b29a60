"""The btu_tasks block written for an app: its own functions only, one line each."""

from __future__ import annotations

import ast

from btu.btu_core.upgrade.convert.declarations import hook_line, hooks_block


def test_block_declares_the_apps_own_functions_sorted():
	block = hooks_block("site_app", ["site_app.tasks.b", "erpnext.x.y", "site_app.tasks.a", "site_app.tasks.a"])
	tree = ast.parse(block)
	assert ast.literal_eval(tree.body[0].value) == ["site_app.tasks.a", "site_app.tasks.b"]


def test_no_block_for_another_apps_functions():
	assert hooks_block("site_app", ["erpnext.x.y"]) == ""


def test_hook_line():
	assert hook_line("myapp.tasks.run") == 'btu_tasks = ["myapp.tasks.run"]'
