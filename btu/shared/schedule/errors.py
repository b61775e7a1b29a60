"""The one error type of schedule semantics."""

from __future__ import annotations

from collections.abc import Collection
from typing import Any

from btu.shared.messages import InputError, _


class ScheduleError(InputError):
	"""An invalid schedule input; names the field, its value and the fix.

	str() reads like "cron_string '61 * * * *': minute 61 is outside 0-59"; the Frappe side shows it translated
	(`btu.btu_core.messages`).
	"""


def check_one_of(field: str, value: Any, choices: Collection[str]) -> None:
	"""Raise ScheduleError for `field` unless `value` is one of `choices`."""
	if value not in choices:
		raise ScheduleError(field, value, _("must be one of {choices}"), choices=", ".join(choices))
