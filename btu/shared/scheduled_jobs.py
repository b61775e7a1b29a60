"""Frappe's Scheduled Job Types fired by BTU: which rows, at which moments, and who owns each slot.

With BTU Configuration's `fire_frappe_jobs` on, the scheduler compiles each of
the site's Scheduled Job Types into cron states of kind FRAPPE_JOB
(`btu.shared.run_kind`) in the site's zone, so the same prepare and release scripts
fire it at its moment, under the same lease, exactly once per slot. The job
calls `btu.btu_core.runs.frappe_jobs.run`, which runs the Scheduled Job Type's own
`execute()` (its Scheduled Job Log, `last_execution` and server-script events
as Frappe writes them).

Frappe's scheduler and BTU may both reach one slot around a switch (Frappe's
tick read the switch just before it changed; BTU had not yet heard it was
turned off). Each side claims the slot before it runs or enqueues it
(`claim_key`, a `SET NX` in the site's cache Redis); the loser leaves it.

Both halves read the frequencies from here, so the scheduler and Frappe's
override agree on what a row's slots are.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Any, ClassVar

from btu.shared.instants import slot_text
from btu.shared.run_kind import RunKind
from btu.shared.run_row import RunPolicy, RunRow
from btu.shared.schedule.cron import compile_cron
from btu.shared.schedule.errors import ScheduleError
from btu.shared.schedule.row import row_moment

if TYPE_CHECKING:
	from btu.shared.schedule import ScheduleSpec

DOCTYPE = "Scheduled Job Type"
# Frappe's "All" runs every scheduler_interval seconds (site config; 240 when unset), as whole minutes.
DEFAULT_SCHEDULER_INTERVAL = 240
# frappe/core/doctype/scheduled_job_type/scheduled_job_type.py, get_next_execution's CRON_MAP (v15 and v16).
CRON_MAP = {
	"Yearly": "0 0 1 1 *",
	"Annual": "0 0 1 1 *",
	"Monthly": "0 0 1 * *",
	"Monthly Long": "0 0 1 * *",
	"Weekly": "0 0 * * 0",
	"Weekly Long": "0 0 * * 0",
	"Daily": "0 0 * * *",
	"Daily Long": "0 0 * * *",
	"Daily Maintenance": "0 0 * * *",
	"Hourly": "0 * * * *",
	"Hourly Long": "0 * * * *",
	"Hourly Maintenance": "0 * * * *",
}
# BTU's own watchdog (a BTU scheduler alive? fires missed?) stays with Frappe's scheduler: fired by BTU,
# it would stop with the very process whose death it is there to report.
# Its path before alerts became a package is its row's until bench migrate resyncs the row from hooks.py.
KEPT_BY_FRAPPE = ("btu.btu_core.alerts.watchdog.check", "btu.btu_core.alerts.check")
# Frappe runs a job that missed its moment once, however late; BTU does too within this window (a Yearly job's period).
CATCH_UP_WINDOW_SECS = 366 * 86400
# How long a slot's claim is kept: long after either side could still be deciding about it.
CLAIM_TTL_SECS = 3600
# Frappe delays each run of a Long frequency by a random 1 to 600 s (get_next_execution, v15 and v16), so the heavy
# jobs due at one boundary (midnight's Daily Long, Sunday's Weekly Long) do not all start at once. BTU spreads them
# over the same window, by the schedule's jitter: a hash of (job type, slot), so every scheduler process agrees.
LONG_JITTER_SECS = 600
FRAPPE, BTU = "frappe", "btu"


def cron_of(frequency: str, cron_format: str | None, scheduler_interval) -> str:
	"""The cron expression Frappe steps the row by: its cron_format when set (whatever the frequency, as Frappe
	reads it), else its frequency's; a ValueError names a frequency neither knows."""
	if (cron_format or "").strip():
		return " ".join(str(cron_format).split())
	if frequency == "All":
		try:
			seconds = int(scheduler_interval or 0) or DEFAULT_SCHEDULER_INTERVAL
		except (TypeError, ValueError):
			seconds = DEFAULT_SCHEDULER_INTERVAL
		return f"*/{max(seconds // 60, 1)} * * * *"
	if frequency in CRON_MAP:
		return CRON_MAP[frequency]
	raise ValueError(f"frequency {frequency!r} has no cron_format; give one, or use one of All, {', '.join(CRON_MAP)}")


def queue_of(frequency: str) -> str:
	"""Frappe's queue for the frequency: long for the Long and Maintenance ones (v16's), else default."""
	return "long" if ("Long" in frequency or "Maintenance" in frequency) else "default"


def jitter_secs_of(frequency: str) -> int:
	"""How late, at most, BTU fires a slot of the frequency: Frappe's window for the Long ones, none for the others
	(Frappe's tick runs those as soon as they are due, all of a site's together)."""
	return LONG_JITTER_SECS if "Long" in frequency else 0


def fired_by_btu(method: str, frequency: str, cron_format: str | None, scheduler_interval) -> bool:
	"""Whether BTU takes this job type when the switch is on. Frappe keeps BTU's own watchdog, and any row whose
	cron BTU would read otherwise than Frappe's croniter: six fields (croniter's seconds come last, BTU's first),
	or one BTU refuses. Both halves decide with this, so no row is left to neither."""
	if method in KEPT_BY_FRAPPE:
		return False
	try:
		cron = cron_of(frequency, cron_format, scheduler_interval)
		if not cron.startswith("@") and len(cron.split()) != 5:
			return False
		compile_cron(cron)
	except (ValueError, ScheduleError):
		return False
	return True


def claim_key(job_type: str, slot: datetime) -> str:
	"""The cache key (before Frappe's site prefix) one side sets to own a job type's slot."""
	return f"btu:frappe-job-slot:{job_type}:{slot_text(slot)}"


@dataclass(frozen=True, slots=True)
class JobTypeRow(RunRow):
	"""A `tabScheduled Job Type` row as the reconciler compiles it: cron in the site's zone, one catch-up run (as
	Frappe makes), skipped while its last run is queued or running (as Frappe's job id dedupe does), on Frappe's queue
	for the frequency with that queue's timeout, a Long frequency's slots spread over Frappe's window for them."""

	kind = RunKind.FRAPPE_JOB
	policy: ClassVar[RunPolicy] = RunPolicy("fire_once", CATCH_UP_WINDOW_SECS, "skip")

	creation: Any
	cron: str  # "" when the row has none: compiled as an invalid row whose error names cron_string
	jitter_secs: int
	last_execution: Any  # its creation when it never ran

	@classmethod
	def of(cls, job: Mapping[str, Any], scheduler_interval) -> JobTypeRow:
		"""The row as `database.frappe_job_rows` (or Frappe's document) reads it; Frappe's "All" runs every
		`scheduler_interval` seconds."""
		name = cls.key_text(job["name"])
		frequency = job.get("frequency") or ""
		try:
			cron = cron_of(frequency, job.get("cron_format"), scheduler_interval)
		except ValueError:
			cron = ""
		method = job.get("method") or job["name"]
		return cls(
			name=name,
			task=name,
			task_name=method,
			function="",
			arguments=None,
			argument_overrides=None,
			queue_name=None,
			task_queue_name=queue_of(frequency),
			max_task_duration=None,
			description=method,
			max_concurrent_runs=0,
			paused=0,
			modified=job.get("modified"),
			creation=job.get("creation"),
			cron=cron,
			jitter_secs=jitter_secs_of(frequency),
			last_execution=job.get("last_execution") or job.get("creation"),
		)

	def spec_columns(self) -> dict[str, Any]:
		return {
			"name": self.name,
			"creation": self.creation,
			"run_frequency": "Cron Style",
			"cron_string": self.cron,
			"time_zone": None,
			"jitter_secs": self.jitter_secs,
			**self.policy.columns(),
		}

	def first_cursors(
		self, spec: ScheduleSpec, logged_slot: str | None, system_tz: str | None, now: datetime
	) -> tuple[datetime | None, datetime | None]:
		# Frappe's next run is its cron's first moment after last_execution; one missed fires once now.
		last = row_moment(self.last_execution, system_tz) or now
		return spec.next_slot(min(last, now)), spec.next_slot(now)
