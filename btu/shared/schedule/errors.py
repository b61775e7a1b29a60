"""The one error type of schedule semantics."""

from __future__ import annotations

from typing import Any, Collection


class ScheduleError(ValueError):
	"""An invalid schedule input; names the field, its value and the fix.

	str() reads like "cron_string '61 * * * *': minute 61 is outside 0-59".
	"""

	def __init__(self, field: str, value: Any, problem: str) -> None:
		self.field = field
		self.value = value
		self.problem = problem
		super().__init__(f"{field} '{'' if value is None else value}': {problem}")


def check_one_of(field: str, value: Any, choices: Collection[str]) -> None:
	"""Raise ScheduleError for `field` unless `value` is one of `choices`."""
	if value not in choices:
		raise ScheduleError(field, value, f"must be one of {', '.join(choices)}")
