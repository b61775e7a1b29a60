"""The shared contract's errors carry a template and its values, so the Frappe side can show them translated.

Every `ScheduleError` in the product passes its problem as `_("a literal template")` (what Frappe's translation
extraction collects) and, as keyword arguments, exactly the values its placeholders name; its text stays what it says."""

import ast
import string
from pathlib import Path

import pytest

from btu.shared.messages import _
from btu.shared.schedule import ScheduleError
from btu.shared.schedule.cron import compile_cron

PRODUCT = Path(__file__).resolve().parents[2] / "btu"


def schedule_error_calls():
	for path in sorted(PRODUCT.rglob("*.py")):
		if "tests" in path.relative_to(PRODUCT).parts:
			continue
		tree = ast.parse(path.read_text())
		for node in ast.walk(tree):
			if isinstance(node, ast.Call) and getattr(node.func, "id", getattr(node.func, "attr", None)) == "ScheduleError":
				yield f"{path.relative_to(PRODUCT.parent)}:{node.lineno}", node


CALLS = list(schedule_error_calls())


def test_the_product_raises_schedule_errors():
	assert len(CALLS) > 40


@pytest.mark.parametrize("where, call", CALLS, ids=[where for where, _call in CALLS])
def test_each_problem_is_a_marked_template_with_its_values(where, call):
	assert len(call.args) == 3, f"{where}: ScheduleError(field, value, _(template), **values)"
	problem = call.args[2]
	marked = isinstance(problem, ast.Call) and getattr(problem.func, "id", None) == "_"
	assert marked and len(problem.args) == 1 and isinstance(problem.args[0], ast.Constant), f"{where}: wrap the problem in _(\"...\")"
	template = problem.args[0].value
	named = {field for _text, field, _spec, _conversion in string.Formatter().parse(template) if field is not None}
	assert named == {keyword.arg for keyword in call.keywords}, f"{where}: {template!r} names {sorted(named)}"


def test_the_text_is_the_template_filled_in():
	with pytest.raises(ScheduleError) as raised:
		compile_cron("61 * * * *")
	error = raised.value
	assert (error.template, error.params) == ("{name} {value} is outside {low}-{high}", {"name": "minute", "value": 61, "low": 0, "high": 59})
	assert str(error) == "cron_string '61 * * * *': minute 61 is outside 0-59"
	assert error.problem == error.template.format(**error.params)


def test_a_template_without_values_is_kept_as_written():
	error = ScheduleError("cron_string", "", _("is required; e.g. {braces} stay"))
	assert (error.problem, error.params) == ("is required; e.g. {braces} stay", {})
