"""The original BTU Task Schedule's timing as this BTU's: the same moments, named in a zone.

The original had two schemas. Before v15.2 `cron_string` was UTC: the Hourly..Yearly helpers were turned into a
UTC cron with the offset of the day they were saved, and the daemon read every cron in BTU Configuration's
`cron_time_zone` (UTC unless an admin changed it; with another zone it read a cron whose hour field is not `*`
as that zone's wall clock). From v15.2 `cron_string` is local time in the schedule's `cron_timezone`, else
`cron_time_zone`. This BTU keeps the cron and names the zone it was read in; a helper keeps the local time its
fields say, in the zone the admin entered it in (the site's), so it no longer drifts an hour across DST.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from btu.shared.messages import InputError, _
from btu.shared.schedule.errors import ScheduleError
from btu.shared.schedule.frequency import HELPERS, MONTH_NAMES
from btu.shared.schedule.zones import parse_zone, zone_name

UTC = "UTC"
# The original's Month select (JAN..DEC) as this BTU's.
MONTHS = {name[:3].upper(): name for name in MONTH_NAMES}
# The original's default frequency: a row without one was read as Cron Style.
DEFAULT_FREQUENCY = "Cron Style"


class HourError(InputError):
	"""An original `hour` (a text field) that is not a whole hour; kept in the upgrade's list, never guessed."""


@dataclass
class ScheduleChange:
	"""The columns to write (only those that change) and what the admin should read about the row."""

	values: dict[str, Any] = field(default_factory=dict)
	notes: list[str] = field(default_factory=list)


def hour_number(text: Any) -> int | None:
	"""The original's text `hour` as this BTU's Int (None when empty); HourError when it is not 0..23."""
	if text is None or isinstance(text, int):
		return text
	value = str(text).strip()
	if not value:
		return None
	if value.isdigit() and int(value) <= 23:
		return int(value)
	raise HourError("hour", text, _("is not a whole hour from 0 to 23; set the schedule's hour and unpause it"))


def convert(row: Mapping[str, Any], *, local_schema: bool, config_zone: str | None, system_zone: str) -> ScheduleChange:
	"""What changes in one original schedule row.

	`local_schema`: the table has the v15.2 `cron_timezone` column. `config_zone`: BTU Configuration's
	`cron_time_zone`. `system_zone`: System Settings' time zone, in which the helpers' fields were entered.
	"""
	change = ScheduleChange()
	frequency = (row.get("run_frequency") or "").strip() or DEFAULT_FREQUENCY
	if frequency != row.get("run_frequency"):
		change.values["run_frequency"] = frequency
	config = _zone(config_zone, "cron_time_zone", change) or UTC
	if local_schema:
		own = _zone(row.get("cron_timezone"), "cron_timezone", change)
		zone = own or config
	elif frequency in HELPERS:
		zone = _zone(system_zone, "System Settings time_zone", change) or UTC
	else:
		zone = _utc_schema_zone(row.get("cron_string"), config, change)
	if not local_schema:
		_weekdays_note(row.get("cron_string"), change)
	if zone != row.get("time_zone"):
		change.values["time_zone"] = zone
	month = (row.get("month") or "").strip()
	if month.upper() in MONTHS and MONTHS[month.upper()] != month:
		change.values["month"] = MONTHS[month.upper()]
	if frequency in ("Monthly", "Yearly") and not local_schema:
		# The original dropped the day and wrote the month as text, so such a row never fired there.
		change.notes.append(
			_(
				"{frequency} schedules never fired in the original BTU (its cron kept no day and a month name); this "
				"one now fires as its fields say"
			).format(frequency=frequency)
		)
	return change


def _utc_schema_zone(cron: Any, config: str, change: ScheduleChange) -> str:
	"""The zone the pre-v15.2 daemon read a Cron Style `cron` in."""
	fields = str(cron or "").split()
	if len(fields) != 5:
		change.notes.append(
			_("has {count} fields; BTU reads 5 (or 6 with leading seconds): check it").format(count=len(fields))
		)
	hour = fields[1] if len(fields) >= 2 else "*"
	return UTC if config == UTC or hour == "*" else config


def _weekdays_note(cron: Any, change: ScheduleChange) -> None:
	"""A UTC-schema cron naming weekdays, a helper's too: the original's two daemons read them differently."""
	fields = str(cron or "").split()
	if len(fields) == 5 and fields[4] != "*":
		change.notes.append(
			_(
				"names weekdays; BTU reads 0-6 from Sunday (as the original's help said), the original's Rust daemon "
				"read 1-7 from Sunday: check the days"
			)
		)


def _zone(name: Any, source: str, change: ScheduleChange) -> str | None:
	"""`name` as a zone this BTU reads (None when empty); a note and None when it is not a zone."""
	text = str(name or "").strip()
	if not text:
		return None
	try:
		return zone_name(parse_zone(text))
	except ScheduleError:
		change.notes.append(
			_("{source} {name!r} is not a time zone; the schedule was given UTC instead: set its time zone").format(
				source=source, name=text
			)
		)
		return None
