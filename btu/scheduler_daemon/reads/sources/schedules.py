"""BTU Task Schedules as runs: the source of kind SCHEDULE, whose key's text is the schedule's own name."""

from __future__ import annotations

from datetime import datetime
from typing import TYPE_CHECKING

from btu.shared.run_kind import RunKind
from btu.shared.schedule.row import EXCLUDED_KEY, SKIPPED_KEY, calendar_window

if TYPE_CHECKING:
	from btu.scheduler_daemon.reads.database import SiteDatabase
	from btu.scheduler_daemon.reads.site_read import SiteRead


def versions(read: SiteRead, names: list[str] | None) -> dict[str, str]:
	"""Enabled schedule -> what changes with its row, its task or its calendar (`SiteDatabase.schedule_versions`)."""
	return {
		row["name"]: f"{row['modified']}|{row['task_modified']}|{row['paused']}|{row['calendar_modified']}"
		for row in read.db.schedule_versions(names)
		if int(row["enabled"] or 0)
	}


def rows(read: SiteRead, names: list[str], now: datetime) -> list[dict]:
	"""The schedule rows named, joined with their task, with what their specs exclude as of `now`."""
	found = with_exclusions(read.db, read.db.schedule_rows(names), now)
	for row in found:
		row["kind"] = RunKind.SCHEDULE
	return found


def with_exclusions(db: SiteDatabase, rows: list[dict], now: datetime) -> list[dict]:
	"""The rows with what their specs exclude: their skipped slots, their calendar's dates in calendar_window."""
	skipped = db.skipped_slots([row["name"] for row in rows])
	low, high = calendar_window(now.date())
	dates = db.calendar_dates(sorted({row["calendar"] for row in rows if row.get("calendar")}), low, high)
	for row in rows:
		row[SKIPPED_KEY] = skipped.get(row["name"], [])
		row[EXCLUDED_KEY] = sorted(dates.get(row.get("calendar"), ()))
	return rows


def existing(db: SiteDatabase, names: list[str]) -> list[str]:
	"""Which of the schedules named have a row."""
	return db.existing_schedules(names)
