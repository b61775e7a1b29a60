"""The fires the state's scripts take and give: a schedule on the due set (`DueEntry`, due.lua's), and one schedule's
planned fires (`FireItem` of `FireJob`s, prepare.lua's). The planner makes them (`leading/planner.py`)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import NamedTuple

from btu.scheduler_daemon.store.jobs import JobShape


class DueEntry(NamedTuple):
	"""A schedule on the due set: its fire time is within the prepare window."""

	site: str
	schedule: str
	fire_at_ms: int


@dataclass
class FireJob:
	"""One fire's job: what differs from the other jobs of its shape."""

	slot_ms: int
	fire_at_ms: int
	job_id: str
	shape: JobShape
	description: str
	data: bytes


@dataclass
class FireItem:
	"""One schedule's fires, planned from its cursor, for the prepare script."""

	site: str
	schedule: str
	expected_cursor: str  # the prepare script writes only if the cursor is still this
	next_cursor: str  # "" when the schedule is finished
	next_fire_at: str
	overlap_skip: bool
	skipped: int
	expired: int
	jobs: list[FireJob]
	count_truncated: bool = False  # skipped and expired are lower bounds: counting stopped at its budget
	skipped_by_request: list[int] = field(
		default_factory=list
	)  # slots (ms) passed over because they were skipped on request
	task: str = ""
	max_concurrent: int = 0  # the task's concurrency limit, applied at release (0: none)
