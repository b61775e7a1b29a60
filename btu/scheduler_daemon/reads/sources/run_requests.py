"""Pending BTU Run Requests as runs: the source of kind RUN_REQUEST, each a Once schedule at its run_at
(`btu.shared.run_requests.RequestRow`)."""

from __future__ import annotations

from datetime import datetime
from typing import TYPE_CHECKING

from btu.shared.run_requests import RequestRow

if TYPE_CHECKING:
	from btu.scheduler_daemon.reads.database import SiteDatabase
	from btu.scheduler_daemon.reads.site_read import SiteRead


def versions(read: SiteRead, names: list[str] | None) -> dict[str, str]:
	"""Pending request -> what changes with its row, its task or its schedule (`SiteDatabase.request_versions`)."""
	if not read.db.has_requests():
		return {}
	return {
		row["name"]: f"{row['modified']}|{row['task_modified']}|0|{row['schedule_modified']}"
		for row in read.db.request_versions(names)
	}


def rows(read: SiteRead, names: list[str], now: datetime) -> list[RequestRow]:
	"""The pending requests named."""
	return [RequestRow.of(row) for row in read.db.request_rows(names)]


def existing(db: SiteDatabase, names: list[str]) -> list[str]:
	"""Which of the requests named have a row (pending or not)."""
	return db.existing_requests(names) if db.has_requests() else []
