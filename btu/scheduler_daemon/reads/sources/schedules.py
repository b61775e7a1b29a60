"""BTU Task Schedules as runs: the source of kind SCHEDULE, whose key's text is the schedule's own name."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime, timezone
from types import MappingProxyType
from typing import TYPE_CHECKING, Any

from btu.shared.instants import parse_iso
from btu.shared.run_kind import RunKind
from btu.shared.run_row import RunRow, task_columns
from btu.shared.schedule.row import EXCLUDED_KEY, SKIPPED_KEY, calendar_window, row_moment

if TYPE_CHECKING:
	from btu.scheduler_daemon.reads.database import SiteDatabase
	from btu.scheduler_daemon.reads.site_read import SiteRead
	from btu.shared.schedule import ScheduleSpec


@dataclass(frozen=True, slots=True)
class ScheduleRow(RunRow):
	"""A schedule row joined with its task (`SiteDatabase.schedule_rows`), with what its spec excludes."""

	kind = RunKind.SCHEDULE
	# Its Task Logs outlive Redis's data: a state lost with it resumes after the newest logged slot.
	resumes_after_logs = True

	columns: Mapping[str, Any]  # the row's columns as SQL returned them, and its exclusions

	@classmethod
	def of(cls, row: dict[str, Any]) -> ScheduleRow:
		"""The row as `with_exclusions` left it."""
		return cls(
			name=cls.key_text(row["name"]),
			**task_columns(row),
			max_concurrent_runs=row.get("task_max_concurrent_runs"),
			paused=row.get("paused"),
			modified=row.get("modified"),
			columns=MappingProxyType(row),
		)

	def spec_columns(self) -> Mapping[str, Any]:
		return self.columns

	def first_cursors(
		self, spec: ScheduleSpec, logged_slot: str | None, system_tz: str | None, now: datetime
	) -> tuple[datetime | None, datetime | None]:
		from_now = spec.next_slot(now)
		resume = resume_after(logged_slot, self.modified, system_tz, now)
		return (from_now if resume == now else spec.next_slot(resume)), from_now


def resume_after(logged_slot: str | None, modified, system_tz: str | None, now: datetime) -> datetime:
	"""Where a schedule new to the state starts: after its newest logged slot, or its row's last change when
	that is later (it was disabled or paused until then: no catch-up for time it was off), else now."""
	logged = parse_logged_slot(logged_slot)
	if logged is None:
		return now
	changed = row_moment(modified, system_tz)
	return min(max(logged, changed), now) if changed else logged


def parse_logged_slot(text: str | None) -> datetime | None:
	"""A Log's slot_utc as an aware UTC instant (naive text is UTC, as the column's name says); None if unreadable."""
	if not text:
		return None
	try:
		value = parse_iso(text, "slot_utc")
	except ValueError:
		return None
	return value.astimezone(timezone.utc) if value.tzinfo else value.replace(tzinfo=timezone.utc)


def versions(read: SiteRead, names: list[str] | None) -> dict[str, str]:
	"""Enabled schedule -> what changes with its row, its task or its calendar (`SiteDatabase.schedule_versions`)."""
	return {
		row["name"]: f"{row['modified']}|{row['task_modified']}|{row['paused']}|{row['calendar_modified']}"
		for row in read.db.schedule_versions(names)
		if int(row["enabled"] or 0)
	}


def rows(read: SiteRead, names: list[str], now: datetime) -> list[ScheduleRow]:
	"""The schedule rows named, joined with their task, with what their specs exclude as of `now`."""
	return [ScheduleRow.of(row) for row in with_exclusions(read.db, read.db.schedule_rows(names), now)]


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
