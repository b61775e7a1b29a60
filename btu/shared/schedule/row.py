"""A BTU Task Schedule row as ScheduleSpec's arguments: which columns, their defaults and checks.

The Desk reads a row from a document and the scheduler from SQL; both name
their columns from here.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from datetime import date, datetime, timezone
from typing import Any

from btu.shared.instants import FRAPPE_DEFAULT_ZONE, parse_iso
from btu.shared.messages import _
from btu.shared.schedule.errors import ScheduleError, check_one_of
from btu.shared.schedule.frequency import HELPERS, frequency_to_cron, whole_number
from btu.shared.schedule.zones import clock_for, parse_zone, wall_seconds
from btu.shared.schedule.zones import zone_name as canonical_zone_name

# The columns a spec is made of.
SPEC_FIELDS = (
	"name", "creation", "run_frequency", "minute", "hour", "day_of_week", "day_of_month", "month",
	"cron_string", "every", "every_unit", "run_at", "time_zone", "start_time", "end_time", "run_limit",
	"jitter_secs", "catch_up_policy", "catch_up_window", "catch_up_max", "overlap_policy",
	"calendar", "calendar_policy",
)  # fmt: skip
# Not columns: what a row's readers (the Desk's spec, the scheduler's source) attach from its child tables and calendar.
SKIPPED_KEY = "skipped_slots"
EXCLUDED_KEY = "excluded_dates"
CALENDAR_POLICIES = {"Skip excluded days": "skip", "Move to next working day": "move"}
# The columns the scheduler reads: the spec's, and whether and what to fire.
SCHEDULER_FIELDS = SPEC_FIELDS + ("task", "enabled", "paused", "modified", "queue_name", "argument_overrides")
FREQUENCIES = HELPERS + ("Cron Style", "Interval", "Once")
UNITS = {"Seconds": 1, "Minutes": 60, "Hours": 3600, "Days": 86400}
MAX_INTERVAL = 100 * 366 * 86400  # seconds; beyond it slots leave datetime's range (year 9999)


def spec_arguments(row: Mapping[str, Any], *, system_time_zone: str | None) -> dict[str, Any]:
	"""ScheduleSpec's keyword arguments from a row's columns (missing/None/"" = the DocType default).

	`system_time_zone` is the site's System Settings time_zone, the zone of a
	row without one. Raises ScheduleError naming the bad column.
	"""
	system_zone = (system_time_zone or "").strip() or FRAPPE_DEFAULT_ZONE
	if _get(row, "time_zone") is None and system_time_zone:
		try:
			parse_zone(system_zone)
		except ScheduleError:
			raise ScheduleError(
				"time_zone",
				"",
				_(
					"is empty and the site's System Settings time_zone {zone} is not a known zone; "
					"set this schedule's time_zone or fix System Settings"
				),
				zone=repr(system_zone),
			) from None
	zone = parse_zone(_get(row, "time_zone"), system_zone)
	frequency = _get(row, "run_frequency")
	if frequency is None:
		# Not the form's default Daily: a row that lost its frequency must not start firing at 00:00.
		raise ScheduleError(
			"run_frequency", "", _("is empty; set it to one of {choices}"), choices=", ".join(FREQUENCIES)
		)
	check_one_of("run_frequency", frequency, FREQUENCIES)
	start = row_instant("start_time", _get(row, "start_time"), system_zone)
	end = row_instant("end_time", _get(row, "end_time"), system_zone)
	if frequency == "Interval":
		slots = _interval(row, start, system_zone)
	elif frequency == "Once":
		slots = _once(row, system_zone)
	else:
		slots = {"kind": "cron", "cron": _cron_text(row, frequency)}
	return dict(
		name=str(_get(row, "name", "")),
		zone_name=canonical_zone_name(zone),
		start=start,
		end=end,
		run_limit=whole_number("run_limit", _get(row, "run_limit"), 0, 0),
		jitter_secs=whole_number("jitter_secs", _get(row, "jitter_secs"), 0, 0),
		catch_up_policy=_get(row, "catch_up_policy", "fire_once"),
		catch_up_window=whole_number("catch_up_window", _get(row, "catch_up_window"), 86400, 0),
		catch_up_max=whole_number("catch_up_max", _get(row, "catch_up_max"), 10, 0),
		overlap_policy=_get(row, "overlap_policy", "allow"),
		skipped=[skipped_instant(value) for value in row.get(SKIPPED_KEY) or ()],
		calendar_policy=_calendar_policy(row),
		excluded_dates=row.get(EXCLUDED_KEY) or () if _get(row, "calendar") else (),
		**slots,
	)


def calendar_window(today: date) -> tuple[date, date]:
	"""The excluded dates a spec carries: from January 1 of last year to December 31 five years ahead.

	Whole calendar years, so the spec (and its fingerprint) changes only at New Year, not daily: a
	recompile (a scheduler restart) finds the same spec and keeps the schedule's cursor. A year back
	covers any catch-up window in use; five ahead outlast any plan. At most 7 * 366 dates.
	"""
	return date(today.year - 1, 1, 1), date(min(today.year + 5, 9999), 12, 31)


def skipped_instant(value: Any) -> int:
	"""A skipped slot (its UTC text, as the child table stores it, or an aware datetime) as epoch seconds."""
	if isinstance(value, str):
		try:
			value = parse_iso(value.strip(), SKIPPED_KEY)
		except ValueError:
			value = None
	if not isinstance(value, datetime):
		raise ScheduleError(SKIPPED_KEY, value, _("is not a UTC instant; use e.g. 2026-11-22T02:30:00Z"))
	if value.tzinfo is None:
		value = value.replace(tzinfo=timezone.utc)
	return math.floor(value.timestamp())


def _calendar_policy(row: Mapping[str, Any]) -> str:
	label = _get(row, "calendar_policy", "Skip excluded days")
	check_one_of("calendar_policy", label, CALENDAR_POLICIES)
	return CALENDAR_POLICIES[label]


def _get(row: Mapping[str, Any], key: str, default: Any = None) -> Any:
	"""A column's value, `default` when it is missing, None or ""."""
	value = row.get(key)
	return default if value is None or value == "" else value


def _cron_text(row: Mapping[str, Any], frequency: str) -> str:
	"""The cron expression of a helper frequency (Hourly..Yearly) or of Cron Style."""
	if frequency in HELPERS:
		return frequency_to_cron(
			frequency,
			_get(row, "minute", 0),
			_get(row, "hour", 0),
			_get(row, "day_of_week", "Monday"),
			_get(row, "day_of_month", 1),
			_get(row, "month", "January"),
		)
	text = _get(row, "cron_string")
	if not text:
		raise ScheduleError("cron_string", "", _("is required for Cron Style; e.g. 0 9 * * 1-5"))
	return " ".join(str(text).split())


def _interval(row: Mapping[str, Any], start: int | None, system_zone: str) -> dict[str, Any]:
	"""An Interval row's kind, every (seconds) and origin: start_time, else creation + every."""
	every = whole_number("every", _get(row, "every"), 0, 1)
	if every == 0:
		raise ScheduleError(
			"every", _get(row, "every"), _("is required for Interval; give a whole number of 1 or more")
		)
	unit = _get(row, "every_unit", "Minutes")
	check_one_of("every_unit", unit, UNITS)
	if every * UNITS[unit] > MAX_INTERVAL:
		raise ScheduleError(
			"every", every, _("{unit} is more than 100 years; use a Yearly or Once schedule"), unit=unit
		)
	if start is not None:
		origin = start
	else:
		created = row_instant("creation", _get(row, "creation"), system_zone)
		if created is None:
			raise ScheduleError(
				"start_time", "", _("an Interval schedule needs a start_time (or a saved creation time) to anchor on")
			)
		origin = created + every * UNITS[unit]
	return {"kind": "interval", "every": every * UNITS[unit], "origin": origin}


def _once(row: Mapping[str, Any], system_zone: str) -> dict[str, Any]:
	"""A Once row's kind and at."""
	value = _get(row, "run_at")
	at = row_instant("run_at", value, system_zone)
	if at is None:
		raise ScheduleError("run_at", "", _("is required for a Once schedule; give the date and time to run"))
	# Once is the one kind whose moment may fall within a second (enqueue_at, a Datetime with a fraction).
	if isinstance(value, str):
		value = parse_iso(value, "run_at")
	return {"kind": "once", "at": at, "at_ms": value.microsecond // 1000}


def row_instant(field_name: str, value: Any, system_zone: str) -> int | None:
	"""A Datetime column as epoch seconds: naive on `system_zone`'s wall clock, as Frappe stores every Datetime (its
	Desk shows and takes it in the person's zone), or aware, or ISO text. The schedule's own time_zone is the zone of
	its recurrence only, never of these columns."""
	if value is None or value == "":
		return None
	if isinstance(value, str):
		try:
			value = parse_iso(value, field_name)
		except ValueError:
			raise ScheduleError(field_name, value, _("is not a date and time; use YYYY-MM-DD HH:MM:SS")) from None
	if not isinstance(value, datetime):
		raise ScheduleError(field_name, value, _("is not a date and time; use YYYY-MM-DD HH:MM:SS"))
	if value.tzinfo is not None:
		return math.floor(value.timestamp())
	try:
		clock = clock_for(parse_zone(system_zone))
	except ScheduleError:
		raise ScheduleError(
			field_name,
			value.isoformat(sep=" "),
			_("is on the site's System Settings time_zone {zone}, which is not a known zone; fix System Settings"),
			zone=repr(system_zone),
		) from None
	return clock.instant(wall_seconds(value))


def row_moment(value: Any, system_tz: str | None) -> datetime | None:
	"""A Datetime column as an aware UTC instant, as `row_instant` reads it on the site's zone (its System Settings
	time_zone, Frappe's default when unset); None when unreadable."""
	try:
		at = row_instant("datetime", value, (system_tz or "").strip() or FRAPPE_DEFAULT_ZONE)
	except ScheduleError:
		return None
	return None if at is None else datetime.fromtimestamp(at, timezone.utc)
