"""The shared contract's errors carry a template and its values, so the Frappe side can show them translated.

Every `InputError` the product raises, of whichever kind (ScheduleError, ArgumentsError, NotRunnable,
DeclaredScheduleError, ...), passes its problem as `_("a literal template")` (what Frappe's translation extraction
collects) and, as keyword arguments, exactly the values its placeholders name; each kind's layout is marked too; its
text stays what it says."""

import ast
import string
from pathlib import Path

import pytest

from btu.shared.messages import InputError, _
from btu.shared.schedule import ScheduleError
from btu.shared.schedule.cron import compile_cron

PRODUCT = Path(__file__).resolve().parents[2] / "btu"


def product_trees():
	for path in sorted(PRODUCT.rglob("*.py")):
		if "tests" not in path.relative_to(PRODUCT).parts:
			yield path.relative_to(PRODUCT.parent), ast.parse(path.read_text())


def name_of(node):
	"""The name a call or a base class is written with: `NotRunnable`, or `declared.NotRunnable`'s `NotRunnable`."""
	return getattr(node, "id", getattr(node, "attr", None))


TREES = list(product_trees())


def input_error_classes():
	"""InputError and every class in the product derived from it, by name."""
	kinds = {"InputError"}
	classes = [node for _path, tree in TREES for node in ast.walk(tree) if isinstance(node, ast.ClassDef)]
	while True:
		more = {node.name for node in classes if any(name_of(base) in kinds for base in node.bases)} - kinds
		if not more:
			return kinds, [node for node in classes if node.name in kinds]
		kinds |= more


KINDS, CLASSES = input_error_classes()
CALLS = [
	(f"{path}:{node.lineno}", node)
	for path, tree in TREES
	for node in ast.walk(tree)
	if isinstance(node, ast.Call) and name_of(node.func) in KINDS
]
LAYOUTS = [
	(f"{node.name}.layout", statement.value)
	for node in CLASSES
	for statement in node.body
	if isinstance(statement, ast.Assign) and [name_of(target) for target in statement.targets] == ["layout"]
]


def marked_template(node) -> str | None:
	"""The literal text of `_("...")`, else None."""
	if (
		isinstance(node, ast.Call)
		and name_of(node.func) == "_"
		and len(node.args) == 1
		and isinstance(node.args[0], ast.Constant)
	):
		return node.args[0].value
	return None


def placeholders(template: str) -> set[str]:
	return {field for _text, field, _spec, _conversion in string.Formatter().parse(template) if field is not None}


def test_each_kind_of_input_error_is_found():
	assert {"ScheduleError", "ArgumentsError", "NotRunnable", "DeclaredScheduleError"} <= KINDS


@pytest.mark.parametrize("kind", sorted(KINDS - {"InputError"}))
def test_each_kind_is_raised(kind):
	assert any(name_of(call.func) == kind for _where, call in CALLS), f"no {kind}(...) in the product"


def test_the_product_raises_input_errors():
	assert len(CALLS) > 80
	assert any(where.startswith("btu/scheduler_daemon/reads/app_files.py:") for where, _call in CALLS)


@pytest.mark.parametrize("where, call", CALLS, ids=[where for where, _call in CALLS])
def test_each_problem_is_a_marked_template_with_its_values(where, call):
	kind = name_of(call.func)
	assert len(call.args) == 3, f"{where}: {kind}(field, value, _(template), **values)"
	template = marked_template(call.args[2])
	assert template is not None, f'{where}: wrap the problem in _("...")'
	named = placeholders(template)
	assert named == {keyword.arg for keyword in call.keywords}, f"{where}: {template!r} names {sorted(named)}"


@pytest.mark.parametrize("where, value", LAYOUTS, ids=[where for where, _value in LAYOUTS])
def test_each_layout_is_marked_and_places_the_problem(where, value):
	template = marked_template(value)
	assert template is not None, f'{where}: wrap the layout in _("...")'
	assert "problem" in placeholders(template) <= {"field", "value", "problem"}, f"{where}: {template!r}"


def test_the_text_is_the_template_filled_in():
	with pytest.raises(ScheduleError) as raised:
		compile_cron("61 * * * *")
	error = raised.value
	assert (error.template, error.params) == (
		"{name} {value} is outside {low}-{high}",
		{"name": "minute", "value": 61, "low": 0, "high": 59},
	)
	assert str(error) == "cron_string '61 * * * *': minute 61 is outside 0-59"
	assert error.problem == error.template.format(**error.params)


def test_a_template_without_values_is_kept_as_written():
	error = ScheduleError("cron_string", "", _("is required; e.g. {braces} stay"))
	assert (error.problem, error.params) == ("is required; e.g. {braces} stay", {})


def test_a_value_that_is_an_input_error_reads_as_its_text():
	inner = InputError(
		"slot", "soon", _("not an ISO 8601 instant; expected e.g. {example}"), example="2026-11-22T02:33:00Z"
	)
	outer = InputError("at", "soon", _("{error}"), error=inner)
	assert str(outer) == "at 'soon': slot 'soon': not an ISO 8601 instant; expected e.g. 2026-11-22T02:33:00Z"
	assert isinstance(outer, ValueError)
