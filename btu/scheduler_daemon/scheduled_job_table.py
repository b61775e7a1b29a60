"""Frappe's own `tabScheduled Job Type`, as the scheduler reads it when a site has BTU fire those jobs.

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


def switched_on(db: SiteDatabase) -> bool:
	"""BTU Configuration.fire_frappe_jobs: whether BTU fires the site's Scheduled Job Types (off when never saved)."""
	return str(db.single_value("BTU Configuration", "fire_frappe_jobs") or "0").strip() not in ("0", "")


def scheduler_enabled(db: SiteDatabase) -> bool:
	"""System Settings.enable_scheduler, as Frappe's is_scheduler_disabled reads it (unset: disabled)."""
	value = str(db.single_value("System Settings", "enable_scheduler") or "0").strip()
	try:
		return bool(int(float(value)))
	except ValueError:
		return False


def select(db: SiteDatabase, names: list[str] | None) -> list[dict[str, Any]]:
	"""The rows named (all when `names` is None), with COLUMNS."""
	q = db._quote
	sql = f"SELECT {', '.join(q(column) for column in COLUMNS)} FROM {q(TABLE)}"
	if names is None:
		return db.query(sql)
	return db._chunked(names, lambda chunk: f"{sql} WHERE {q('name')} IN ({', '.join(['%s'] * len(chunk))})")


def summary(db: SiteDatabase) -> tuple[int, str]:
	"""(row count, checksum) over VERSION, computed by the database."""
	q = db._quote
	crc = "hashtext" if db.postgres else "CRC32"
	columns = ", ".join(q(column) for column in ("name", *VERSION))
	[row] = db.query(f"SELECT COUNT(*) AS n, SUM({crc}(CONCAT_WS('|', {columns}))) AS checksum FROM {q(TABLE)}")
	return int(row["n"]), str(row["checksum"])


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
