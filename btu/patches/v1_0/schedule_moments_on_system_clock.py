"""Each BTU Task Schedule's Run At, Start and End rewritten on the system zone's wall clock, at the same moments.

BTU read these three on the schedule's own time_zone, while Frappe's Desk writes every Datetime on the system zone's
clock, converted from the zone it shows the person: a time typed into the form fired at a moment neither zone named.
They are now read as Frappe writes them (btu.shared.schedule.row.row_instant); each stored value is moved so that it
names the moment it named before, and no fire moves.
"""

from datetime import datetime, timezone

import frappe
from frappe.utils import get_datetime

from btu.btu_core.instants import to_system_naive
from btu.shared.schedule import ScheduleError
from btu.shared.schedule.zones import clock_for, parse_zone, wall_seconds

FIELDS = ("run_at", "start_time", "end_time")


def execute():
	moved = 0
	for row in frappe.get_all(
		"BTU Task Schedule", filters={"time_zone": ["is", "set"]}, fields=["name", "time_zone", *FIELDS]
	):
		try:
			clock = clock_for(parse_zone(row.time_zone))
		except ScheduleError:
			print(
				f"BTU: schedule {row.name}: time_zone {row.time_zone!r} is not a known zone, so its Run At, Start and"
				" End were left as stored; they now read on the system time zone's clock: check them"
			)
			continue
		values = {}
		for field in FIELDS:
			if not row[field]:
				continue
			old = get_datetime(row[field])
			instant = datetime.fromtimestamp(clock.instant(wall_seconds(old)), timezone.utc)
			new = to_system_naive(instant).replace(microsecond=old.microsecond)
			if new != old:
				values[field] = new
		if values:
			frappe.db.set_value("BTU Task Schedule", row.name, values, update_modified=False)
			moved += 1
	if moved:
		print(
			f"BTU: Run At, Start and End of {moved} schedules rewritten on the system time zone's clock, same moments"
		)
