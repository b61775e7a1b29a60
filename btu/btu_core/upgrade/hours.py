"""Before the DocTypes sync: the original schedule's text `hour` as numbers, so its column can become an Int.

The sync makes it `int not null default 0`, which MariaDB refuses while a row holds NULL, "" or text. An empty
hour (a Cron Style row's, which has none) becomes 0; a text that is not an hour becomes 0 too, is kept in the
notes, and `rows` pauses its schedule, so nothing fires at an hour nobody chose.
"""

from __future__ import annotations

import frappe

from btu.btu_core.upgrade import notes
from btu.btu_core.upgrade.convert.schedules import HourError, hour_number
from btu.btu_core.upgrade.tables import SITE, Tables

SCHEDULE = "BTU Task Schedule"
TEXT_TYPES = ("varchar", "char", "text", "tinytext", "mediumtext", "longtext")


def execute() -> None:
	notes.add(convert(SITE))


def convert(tables: Tables) -> list[dict]:
	"""Each text hour of `tables.schedule` as its number; the notes of those that are not one."""
	if tables.columns(tables.schedule).get("hour") not in TEXT_TYPES:
		return []
	found = []
	for name, text in frappe.db.sql(f"select name, hour from `{tables.schedule}`"):
		try:
			number = hour_number(text)
		except HourError as exc:
			found.append(notes.note(SCHEDULE, name, "hour", text, exc.problem))
			number = None
		if str(number or 0) != text:
			frappe.db.sql(f"update `{tables.schedule}` set hour = %s where name = %s", (str(number or 0), name))
	return found
