"""The shared contract's error messages: a template and its arguments, translated where they are shown.

An error the Frappe side shows to a user is an `InputError` (or one of its kinds: a schedule's, a task's arguments',
an undeclared function's, a bad `btu_schedules` hook's), raised with its problem as a template wrapped in `_` and the
values as keyword arguments: `ScheduleError("minute", text, _("{name} {value} is outside {low}-{high}"), name="minute",
value=61, low=0, high=59)`. `_` only marks the template, as gettext_noop does, for Frappe's translation extraction
(`bench generate-pot-file` collects the app's `_("...")` calls); the Frappe side translates the template and then
fills in the values (`btu.btu_core.messages`); the scheduler logs it in English.
"""

from __future__ import annotations

from typing import Any


def _(template: str) -> str:
	"""`template`, marked for translation."""
	return template


class InputError(ValueError):
	"""An input the shared code refuses: the field, its value and the problem, a marked template and its values.

	str() is `layout` filled in, in English: "cron_string '61 * * * *': minute 61 is outside 0-59". A value that is
	itself an InputError (a hook entry's function refused as undeclared, say) is shown as that error is.
	"""

	# How the field, its value and the problem read together; a kind of error whose text reads otherwise sets its own.
	layout = _("{field} '{value}': {problem}")

	def __init__(self, field: str, value: Any, template: str, /, **params: Any) -> None:
		self.field = field
		self.value = value
		self.template = template
		self.params = params
		self.problem = template.format(**params) if params else template
		super().__init__(self.layout.format(field=field, value="" if value is None else value, problem=self.problem))
