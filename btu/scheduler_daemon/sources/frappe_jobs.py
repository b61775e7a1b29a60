"""Frappe's own `tabScheduled Job Type`, as the scheduler reads it when a site has BTU fire those jobs (the switches
that say whether it does are read with the site's settings: `site_settings.read`).

Functions of a `SiteDatabase` (its connection, quoting and chunking), kept apart from BTU's own tables.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from btu.shared import scheduled_jobs

if TYPE_CHECKING:
	from btu.scheduler_daemon.database import SiteDatabase

TABLE = "tabScheduled Job Type"
COLUMNS = ("name", "creation", "modified", "method", "frequency", "cron_format", "stopped", "last_execution")
# What tells that a row changed: last_execution moves with every run, so it is not in it.
VERSION = ("modified", "method", "frequency", "cron_format", "stopped")


def select(db: SiteDatabase, names: list[str] | None) -> list[dict[str, Any]]:
	"""The rows named (all when `names` is None), with COLUMNS."""
	q = db._quote
	sql = f"SELECT {', '.join(q(column) for column in COLUMNS)} FROM {q(TABLE)}"
	if names is None:
		return db.query(sql)
	return db._chunked(names, lambda chunk: f"{sql} WHERE {q('name')} IN ({', '.join(['%s'] * len(chunk))})")


def summary_sql(db: SiteDatabase, qualified: bool = False) -> str:
	"""The query of (n, checksum) over VERSION, computed by the database (`qualified`: the table named with its database)."""
	q = db._quote
	crc = "hashtext" if db.postgres else "CRC32"
	columns = ", ".join(q(column) for column in ("name", *VERSION))
	return f"SELECT COUNT(*) AS n, SUM({crc}(CONCAT_WS('|', {columns}))) AS checksum FROM {db._table(TABLE, qualified)}"


def versions(db: SiteDatabase, names: list[str] | None) -> list[dict[str, Any]]:
	"""The rows named (all when None) under their states' names, marked `derived`, enabled unless stopped, with `version`."""
	return [
		{**row, "name": scheduled_jobs.state_name(row["name"]), "derived": 1, "enabled": not int(row["stopped"] or 0), "version": "|".join(str(row[c]) for c in VERSION)}
		for row in select(db, names)
	]


def schedule_rows(db: SiteDatabase, names: list[str], scheduler_interval) -> list[dict[str, Any]]:
	"""The rows named by their states' names, as schedule rows (`scheduled_jobs.as_schedule_row`)."""
	rows = select(db, [scheduled_jobs.job_type_of(name) for name in names]) if names else []
	return [scheduled_jobs.as_schedule_row(row, scheduler_interval) for row in rows]
