"""The BTU Task Schedule form's Hourly/Daily/Weekly/Monthly/Yearly inputs as cron.

The expression is local wall-clock time in the schedule's zone; nothing is
shifted to UTC (the original BTU froze today's offset and broke across DST).
"""

from __future__ import annotations

import calendar
from typing import Any

from btu.shared.messages import _
from btu.shared.schedule.errors import ScheduleError

HELPERS = ("Hourly", "Daily", "Weekly", "Monthly", "Yearly")
WEEKDAYS = ("Sunday", "Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday")
MONTH_NAMES = tuple(calendar.month_name)[1:]
# The longest each month gets (February 29 in leap years).
MONTH_DAYS = (31, 29, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31)


def whole_number(field: str, value: Any, default: int, low: int, high: int | None = None) -> int:
	"""An Int form field: None/"" -> default; bad or out of range -> ScheduleError."""
	if value is None or value == "":
		return default
	if isinstance(value, bool):
		value = int(value)
	try:
		number = int(str(value).strip()) if not isinstance(value, int) else value
	except ValueError:
		raise ScheduleError(field, value, _("must be a whole number")) from None
	if number < low or (high is not None and number > high):
		name = field.replace("_", " ")
		if high is None:
			raise ScheduleError(
				field, value, _("{name} {number} is outside {low} or more"), name=name, number=number, low=low
			)
		raise ScheduleError(
			field, value, _("{name} {number} is outside {low}-{high}"), name=name, number=number, low=low, high=high
		)
	return number


def frequency_to_cron(
	run_frequency: str,
	minute: Any = 0,
	hour: Any = 0,
	day_of_week: Any = "Monday",
	day_of_month: Any = 1,
	month: Any = "January",
) -> str:
	"""A 5-field cron expression for one of the form's helper frequencies."""
	if run_frequency not in HELPERS:
		raise ScheduleError(
			"run_frequency", run_frequency, _("has no cron form; expected one of {choices}"), choices=", ".join(HELPERS)
		)
	m = whole_number("minute", minute, 0, 0, 59)
	if run_frequency == "Hourly":
		return f"{m} * * * *"
	h = whole_number("hour", hour, 0, 0, 23)
	if run_frequency == "Daily":
		return f"{m} {h} * * *"
	if run_frequency == "Weekly":
		name = _title(day_of_week, "Monday")
		if name not in WEEKDAYS:
			raise ScheduleError(
				"day_of_week",
				day_of_week,
				_("must be one of {choices}"),
				choices=", ".join(WEEKDAYS[1:] + WEEKDAYS[:1]),
			)
		return f"{m} {h} * * {WEEKDAYS.index(name)}"
	d = whole_number("day_of_month", day_of_month, 1, 1, 31)
	if run_frequency == "Monthly":
		return f"{m} {h} {d} * *"
	name = _title(month, "January")
	if name not in MONTH_NAMES:
		raise ScheduleError(
			"month", month, _("must be a month name, {first} to {last}"), first=MONTH_NAMES[0], last=MONTH_NAMES[-1]
		)
	number = MONTH_NAMES.index(name) + 1
	if d > MONTH_DAYS[number - 1]:
		raise ScheduleError(
			"day_of_month",
			day_of_month,
			_("{month} has no day {day}; pick a day from 1 to {last}"),
			month=name,
			day=d,
			last=MONTH_DAYS[number - 1],
		)
	return f"{m} {h} {d} {number} *"


def _title(value: Any, default: str) -> Any:
	"""A Select value as the form spells it; None/"" -> the default."""
	if value is None or value == "":
		return default
	return value.strip().title() if isinstance(value, str) else value
