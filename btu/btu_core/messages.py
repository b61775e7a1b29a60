"""Errors of the shared contract in the user's language.

A `ScheduleError` carries its problem as a template (marked with `btu.shared.messages._`, so Frappe's translation
extraction collects it) and its values: the template is translated first, then filled in."""

from __future__ import annotations

from frappe import _


def schedule_error(exc, field: str | None = None) -> str:
	"""`exc`, a ScheduleError, as a user reads it: "<field> '<value>': <problem>", translated. `field` names the input
	when the form's differs from the schedule's (BTU Configuration's default_time_zone)."""
	problem = _(exc.template)
	if exc.params:
		problem = problem.format(**exc.params)
	return _("{0} '{1}': {2}").format(field or exc.field, "" if exc.value is None else exc.value, problem)
