"""No SQL function written as a string in Frappe's list and value reads.

Frappe v16 refuses them ("SQL functions are not allowed as strings in SELECT", frappe/crm#1566,
frappe/helpdesk#2770): `fields=["count(*) as n"]` or `group_by="date(x)"` worked on v15 and fail on
v16. The tier-2 bench is v15, where they still work, so this reads the Frappe side's source instead
(its tests too): aggregates go through frappe.qb (btu.btu_core.insights.run_stats) or plain rows.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

pytestmark = pytest.mark.versions

BTU = Path(__file__).resolve().parents[2] / "btu"
# Methods -> (index of the positional argument holding fields, keyword arguments that hold SQL text).
READS = {
	"get_list": (1, ("fields", "group_by", "order_by", "pluck")),
	"get_all": (1, ("fields", "group_by", "order_by", "pluck")),
	"get_value": (2, ("fieldname", "order_by")),
	"get_values": (2, ("fieldname", "order_by")),
}


def strings(node: ast.AST) -> list[str]:
	return [n.value for n in ast.walk(node) if isinstance(n, ast.Constant) and isinstance(n.value, str)]


def sql_in_reads(source: str, where: str) -> list[str]:
	"""'where:line: text' for each string with a "(" in the SQL-text arguments of a get_list-like call."""
	found = []
	for call in ast.walk(ast.parse(source)):
		if not (isinstance(call, ast.Call) and isinstance(call.func, ast.Attribute) and call.func.attr in READS):
			continue
		position, keywords = READS[call.func.attr]
		arguments = [k.value for k in call.keywords if k.arg in keywords]
		if len(call.args) > position:
			arguments.append(call.args[position])
		found += [
			f"{where}:{call.lineno}: {text!r}" for argument in arguments for text in strings(argument) if "(" in text
		]
	return found


def frappe_side() -> list[Path]:
	return sorted(path for path in BTU.rglob("*.py") if not path.is_relative_to(BTU / "scheduler_daemon"))


def test_no_sql_function_strings_in_get_list_fields():
	found = [hit for path in frappe_side() for hit in sql_in_reads(path.read_text(), str(path.relative_to(BTU.parent)))]
	assert not found, "Frappe v16 refuses these (use frappe.qb, or plain fields):\n" + "\n".join(found)


def test_the_reader_finds_what_v16_refuses_and_nothing_else():
	refused = """
frappe.get_list("X", fields=["date(started) as day", "status", "count(*) as runs"], group_by="date(started), status")
frappe.get_all("X", ["sum(amount) as total"])
frappe.db.get_value("X", {"a": 1}, "max(b)")
frappe.db.get_all("X", filters={}, fields=[{"COUNT": "*"}, "max(b)"], order_by="count(*) desc")
"""
	assert [hit.split(": ", 1)[1] for hit in sql_in_reads(refused, "s")] == [
		"'date(started) as day'", "'count(*) as runs'", "'date(started), status'", "'sum(amount) as total'", "'max(b)'",
		"'max(b)'", "'count(*) desc'",
	]  # fmt: skip
	fine = """
frappe.get_list("X", fields=["name", "status"], filters={"note": "a (b)"}, order_by="creation desc", group_by="status")
frappe.db.get_value("X", "name (with brackets)", "status")
print("count(*)")
"""
	assert sql_in_reads(fine, "s") == []
