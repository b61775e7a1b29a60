"""The one error type of schedule semantics."""

from __future__ import annotations

from typing import Any, Collection

from btu.shared.messages import _


class ScheduleError(ValueError):
	"""An invalid schedule input; names the field, its value and the fix.

	str() reads like "cron_string '61 * * * *': minute 61 is outside 0-59". The problem is a template marked with
	`btu.shared.messages._` and its `params`, so the Frappe side shows it translated (`btu.btu_core.messages`).
	"""

	def __init__(self, field: str, value: Any, template: str, /, **params: Any) -> None:
		self.field = field
		self.value = value
		self.template = template
		self.params = params
		self.problem = template.format(**params) if params else template
		super().__init__(f"{field} '{'' if value is None else value}': {self.problem}")


def check_one_of(field: str, value: Any, choices: Collection[str]) -> None:
	"""Raise ScheduleError for `field` unless `value` is one of `choices`."""
	if value not in choices:
		raise ScheduleError(field, value, _("must be one of {choices}"), choices=", ".join(choices))
