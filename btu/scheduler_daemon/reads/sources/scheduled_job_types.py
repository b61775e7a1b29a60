"""Frappe's Scheduled Job Types as runs: the source of kind FRAPPE_JOB, read from Frappe's own `tabScheduled Job Type`
when a site has BTU fire those jobs (the switches that say whether it does are read with the site's settings:
`site_settings.read`), each row BTU takes a cron schedule (`btu.shared.scheduled_jobs.JobTypeRow`).

Functions of a `SiteDatabase` (its connection, quoting and chunking), kept apart from BTU's own tables.
"""

from __future__ import annotations

from datetime import datetime
from typing import TYPE_CHECKING, Any

from btu.scheduler_daemon.reads.database import JOB_TYPE_TABLE
from btu.shared import scheduled_jobs

if TYPE_CHECKING:
	from btu.scheduler_daemon.reads.database import SiteDatabase
	from btu.scheduler_daemon.reads.site_read import SiteRead

TABLE = JOB_TYPE_TABLE
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


def summary_sql(db: SiteDatabase, qualified: bool = False, lead: str = "", trail: str = "") -> str:
	"""The query of (n, checksum) over VERSION, computed by the database (`qualified`: the table named with its
	database; `lead` and `trail`: columns selected before and after them)."""
	q = db._quote
	crc = "hashtext" if db.postgres else "CRC32"
	columns = ", ".join(q(column) for column in ("name", *VERSION))
	return (
		f"SELECT {lead}COUNT(*) AS n, SUM({crc}(CONCAT_WS('|', {columns}))) AS checksum{trail} "
		f"FROM {db._table(TABLE, qualified)}"
	)


def versions(read: SiteRead, names: list[str] | None) -> dict[str, str]:
	"""While the site has BTU fire them: each job type BTU takes (not stopped, `scheduled_jobs.fired_by_btu`) -> its
	VERSION columns."""
	if not read.scheduled_jobs:
		return {}
	return {
		row["name"]: "|".join(str(row[c]) for c in VERSION)
		for row in select(read.db, names)
		if not int(row["stopped"] or 0)
		and scheduled_jobs.fired_by_btu(
			row["method"] or "", row["frequency"] or "", row["cron_format"], read.scheduler_interval
		)
	}


def rows(read: SiteRead, names: list[str], now: datetime) -> list[scheduled_jobs.JobTypeRow]:
	"""The job types named."""
	return [scheduled_jobs.JobTypeRow.of(row, read.scheduler_interval) for row in select(read.db, names)]


def existing(db: SiteDatabase, names: list[str]) -> list[str]:
	"""Which of the job types named have a row."""
	return [row["name"] for row in select(db, names)] if db.has_table(TABLE) else []
