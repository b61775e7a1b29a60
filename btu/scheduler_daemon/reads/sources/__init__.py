"""Where the scheduler's runs come from: one module per kind of run (`btu.shared.run_kind.RunKind`).

Each answers the same questions of a site's database, with its rows' own names: which rows are enabled, with what
tells that one changed (`versions`); those rows as the reconciler compiles them (`rows`: the source's own type of
`btu.shared.run_row.RunRow`, its key's text as `name`); which of some named rows exist (`existing`). Here the
reconciler's names, its runs' key texts (the state's names, and those RPC commands carry), are read back as keys
(`RunKey.parse`) and each kind's handed to its source.
"""

from __future__ import annotations

from datetime import datetime
from typing import TYPE_CHECKING

from btu.scheduler_daemon.reads.sources import run_requests, scheduled_job_types, schedules
from btu.shared.run_kind import RunKey, RunKind

if TYPE_CHECKING:
	from btu.scheduler_daemon.reads.database import SiteDatabase
	from btu.scheduler_daemon.reads.site_read import SiteRead
	from btu.shared.run_row import RunRow

SOURCES = {RunKind.SCHEDULE: schedules, RunKind.RUN_REQUEST: run_requests, RunKind.FRAPPE_JOB: scheduled_job_types}


def by_kind(names: list[str] | None) -> dict[RunKind, list[str] | None]:
	"""Runs' key texts as each kind's row names (None, "every row", for each kind when `names` is None); a kind none
	of `names` is of is left out."""
	if names is None:
		return dict.fromkeys(SOURCES)
	named: dict[RunKind, list[str]] = {}
	for name in names:
		run = RunKey.parse(name)
		named.setdefault(run.kind, []).append(run.name)
	return {kind: named[kind] for kind in SOURCES if kind in named}


def versions(read: SiteRead, names: list[str] | None) -> tuple[dict[str, str], list[str]]:
	"""The enabled runs named (every one when `names` is None), key text -> version; and the schedules left out for a
	name that reads as another kind's key (the Desk refuses such a name; SQL may write one)."""
	found: dict[str, str] = {}
	refused: list[str] = []
	for kind, named in by_kind(names).items():
		for name, version in SOURCES[kind].versions(read, named).items():
			run = RunKey(kind, name)
			if run.reads_back():
				found[run.format()] = version
			else:
				refused.append(name)
	return found, refused


def rows(read: SiteRead, names: list[str], now: datetime) -> list[RunRow]:
	"""The runs named by their key texts, each source's as its own row type (those whose rows are gone left out)."""
	return [row for kind, named in by_kind(names).items() for row in SOURCES[kind].rows(read, named, now)]


def existing(db: SiteDatabase, names: list[str]) -> set[str]:
	"""Which of the runs named by their key texts have a row."""
	return {
		RunKey(kind, name).format()
		for kind, named in by_kind(names).items()
		for name in SOURCES[kind].existing(db, named)
	}
