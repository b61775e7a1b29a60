"""Errors of the shared contract in the user's language.

An `InputError` (btu.shared.messages) carries its problem as a template (marked with `btu.shared.messages._`, so
Frappe's translation extraction collects it) and its values: the template is translated first, then filled in."""

from __future__ import annotations

from frappe import _

from btu.shared.messages import InputError


def input_error(exc: InputError, field: str | None = None) -> str:
	"""`exc` as a user reads it, translated: its layout ("<field> '<value>': <problem>" for most) filled in. `field`
	names the input when the caller's differs from the shared code's (BTU Configuration's default_time_zone,
	enqueue_at's method). A value that is itself an InputError is shown translated too."""
	params = {
		name: input_error(value) if isinstance(value, InputError) else value for name, value in exc.params.items()
	}
	problem = _(exc.template).format(**params) if params else _(exc.template)
	return _(exc.layout).format(field=field or exc.field, value="" if exc.value is None else exc.value, problem=problem)
