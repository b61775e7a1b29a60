"""The site's upgrade: BTU Configuration's original settings read, the rows converted, the notes kept and printed,
its Run Later entries made run requests, its own Page, Reports and Workspace deleted."""

from __future__ import annotations

import frappe
from frappe.utils import get_system_timezone

from btu.btu_core.upgrade import hours, leftovers, notes, rows, run_later
from btu.btu_core.upgrade.tables import SITE
from btu.btu_core.upgrade.undeclared import print_report, undeclared
from btu.shared.schedule import ScheduleError, parse_zone


def execute() -> None:
	config_zone = single("cron_time_zone")
	bad_hours = {n["name"] for n in notes.stored() if n["doctype"] == hours.SCHEDULE and n["field"] == "hour"}
	notes.add(rows.convert(SITE, config_zone=config_zone, system_zone=get_system_timezone(), bad_hours=bad_hours))
	if config_zone and not single("default_time_zone") and rows.LOCAL_SCHEMA_COLUMN in SITE.columns(SITE.schedule):
		# From v15.2 a schedule without a zone of its own was read in cron_time_zone: new ones start there too.
		# (Before, cron_time_zone was the UTC of its crons, not a zone the admin thinks in.)
		try:
			parse_zone(config_zone)
			frappe.db.set_single_value(notes.CONFIG, "default_time_zone", config_zone)
		except ScheduleError:
			pass
	notes.add(run_later.convert())
	leftovers.delete()
	print_report(undeclared())


def single(field: str) -> str | None:
	"""A BTU Configuration value as stored, also one its DocType no longer has (the original's)."""
	value = frappe.db.sql("select value from tabSingles where doctype = %s and field = %s", (notes.CONFIG, field))
	return value[0][0] if value else None
