"""The one error type of schedule semantics."""

from __future__ import annotations

from typing import Any


class ScheduleError(ValueError):
	"""An invalid schedule input; names the field, its value and the fix.

	str() reads like "cron_string '61 * * * *': minute 61 is outside 0-59".
	"""

	def __init__(self, field: str, value: Any, problem: str) -> None:
		self.field = field
		self.value = value
		self.problem = problem
		super().__init__(f"{field} '{'' if value is None else value}': {problem}")
