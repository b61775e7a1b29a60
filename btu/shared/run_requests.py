"""Run requests: one-off runs that the scheduler fires like a schedule's slot.

A retry, a backfilled slot, a chained run and an `enqueue_at` call are each
a row of `BTU Run Request` (the site database is the source of truth). The scheduler compiles
a pending request into a Once state of kind RUN_REQUEST (`btu.shared.run_kind`), so the same
prepare and release scripts fire it at its `run_at`, exactly once, through failovers and Redis losing its data. The
task runner then claims the run under the request's key: a retry or a
backfill by (schedule, slot, attempt), a chained run by the request itself.

A request's name is derived from what it is for (`request_name`), so asking
twice, from two workers or two clicks, inserts one row.
"""

from __future__ import annotations

import hashlib
import json
import uuid
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any, ClassVar

from btu.shared.instants import from_ms, slot_text
from btu.shared.run_kind import RunKind
from btu.shared.run_row import RunPolicy, RunRow, task_columns

if TYPE_CHECKING:
	from btu.shared.schedule import ScheduleSpec

DOCTYPE = "BTU Run Request"
RETRY, BACKFILL, CHAIN = "Retry", "Backfill", "Chain"
# A function run at a moment from code (btu.enqueue_at): the row holds the function and its arguments, no Task.
ENQUEUE = "Enqueue"
# Pending: the scheduler fires it at run_at. Waiting: a backfill slot queued behind the one before it
# (one at a time). Done: its run wrote a Task Log. Cancelled: withdrawn before it ran.
PENDING, WAITING, DONE, CANCELLED = "Pending", "Waiting", "Done", "Cancelled"
# A request the scheduler could not fire within this long of its run_at (no scheduler ran) is not fired.
CATCH_UP_WINDOW_SECS = 86400
# The most slots one backfill may ask for; a wider range is refused with the count it would make.
MAX_BACKFILL_SLOTS = 1000
MAX_ATTEMPTS = 100
# Chains are bounded at run time (a cycle written past the save's check, or a fan-out that doubles at each link, stops
# here) and on save. A chained run carries its lineage: the Log of its chain's first run (its root) and its depth.
# The longest chain of links from a root run: a run this deep starts no chained task.
MAX_CHAIN_DEPTH = 10
# The most chained runs one root run may start, at every depth together.
MAX_CHAIN_RUNS = 100
# The most Chained Tasks rows one Task may have.
MAX_CHAINED_TASKS = 20
# The longest a retry waits, whatever its backoff says.
MAX_RETRY_DELAY_SECS = 30 * 86400
RETRY_ON = ("Any Failure", "Timeout", "Retry Signal")


def request_name(*key) -> str:
	"""The name of the request for `key`, the same for every ask of the same run."""
	digest = hashlib.sha1(json.dumps([str(part) for part in key]).encode()).hexdigest()[:20]
	return f"RR-{digest}"


def slot_request_name(schedule: str, slot: datetime, attempt: int) -> str:
	"""A retry's or a backfill's request name: one per (schedule, slot, attempt), whichever origin asks first."""
	return request_name("slot", schedule, slot_text(slot), attempt)


def chain_request_name(parent_log: str, task: str, attempt: int = 1) -> str:
	"""A chained run's request name: one per (the Log that started it, the chained task, attempt)."""
	return request_name(CHAIN, parent_log, task, *([attempt] if attempt > 1 else []))


def job_key(method: str, job_id: str) -> str:
	"""An enqueue_at `job_id` as its request stores it, scoped to the app whose function it runs ("myapp:reminder-1"):
	two apps choosing one id never meet, and an app's own code is the only one choosing ids in its scope."""
	return f"{method.partition('.')[0]}:{job_id}"


def enqueue_request_name(key: str | None = None, generation: int = 1) -> str:
	"""An enqueue_at request's name: with a `job_key`, one per (key, generation), so two asks of the same pending
	generation insert one row and the next one follows only once that one ran or was withdrawn; without, a new one."""
	return request_name(ENQUEUE, key, generation) if key else request_name(ENQUEUE, uuid.uuid4().hex)


def chained_runs_allowed(depth: int, started: int, wanted: int) -> int:
	"""How many of `wanted` chained runs a run at chain `depth` (0: a root run) may start, its root run's chain having
	started `started` already: none past MAX_CHAIN_DEPTH, and no more than MAX_CHAIN_RUNS in all."""
	if depth >= MAX_CHAIN_DEPTH:
		return 0
	return max(0, min(wanted, MAX_CHAIN_RUNS - started))


def retry_delay(attempt: int, initial: float, factor: float, maximum: float) -> float:
	"""Seconds to wait before `attempt` (2 for the first retry): initial * factor^(attempt - 2), at most `maximum`
	(0: at most MAX_RETRY_DELAY_SECS, as with any cap above it)."""
	if attempt < 2:
		raise ValueError(f"attempt {attempt}: a retry is attempt 2 or later")
	cap = min(maximum, MAX_RETRY_DELAY_SECS) if maximum > 0 else MAX_RETRY_DELAY_SECS
	try:
		delay = initial * factor ** (attempt - 2)
	except OverflowError:
		delay = cap
	return max(0.0, min(delay, cap))


def whole_second_after(moment: datetime) -> datetime:
	"""`moment` rounded up to a whole second: a backfilled slot's or a chained run's run_at, as a Once slot is."""
	whole = moment.replace(microsecond=0)
	return whole if whole == moment else whole + timedelta(seconds=1)


def millisecond_after(moment: datetime) -> datetime:
	"""`moment` rounded up to a whole millisecond, what run_at_utc holds: a retry or an enqueued run never starts before
	the moment it was given (a Once state fires a run_at's milliseconds into its whole-second slot)."""
	extra = moment.microsecond % 1000
	return moment + timedelta(microseconds=1000 - extra) if extra else moment


@dataclass(frozen=True, slots=True)
class RequestRow(RunRow):
	"""A pending request as the reconciler compiles it: a Once schedule in UTC at its run_at (to the millisecond),
	fired once within CATCH_UP_WINDOW_SECS however late it is found, and never after its Log is written (it is no
	longer pending then); on its schedule's queue when it has one."""

	kind = RunKind.RUN_REQUEST
	policy: ClassVar[RunPolicy] = RunPolicy("fire_once", CATCH_UP_WINDOW_SECS, "allow")

	run_at: Any

	@classmethod
	def of(cls, request: Mapping[str, Any]) -> RequestRow:
		"""A pending request row, joined as `database.request_rows` reads it: its Task's columns, its schedule's queue
		and argument overrides. Not held back by the Task's concurrency limit (like Run Now): a held-back request would
		never run."""
		columns = enqueued_columns(request) if request.get("origin") == ENQUEUE else request
		return cls(
			name=cls.key_text(request["name"]),
			**task_columns(columns),
			max_concurrent_runs=0,
			paused=0,
			modified=request.get("modified"),
			run_at=request.get("run_at_utc") or "",
		)

	def spec_columns(self) -> dict[str, Any]:
		return {
			"name": self.name,
			"run_frequency": "Once",
			"run_at": self.run_at,
			"time_zone": "UTC",
			**self.policy.columns(),
		}

	def first_cursors(
		self, spec: ScheduleSpec, logged_slot: str | None, system_tz: str | None, now: datetime
	) -> tuple[datetime | None, datetime | None]:
		at = from_ms(spec.at * 1000)
		return at, at


def enqueued_columns(request: Mapping[str, Any]) -> dict[str, Any]:
	"""An Enqueue request has no Task: its own function, arguments, queue and timeout stand in for its columns."""
	method = request.get("method") or ""
	return {
		"task": method,
		"task_name": method,
		"task_function_string": method,
		"task_arguments": request.get("kwargs"),
		"task_queue_name": request.get("queue"),
		"task_max_task_duration": request.get("timeout"),
		"task_desc_short": method,
		"queue_name": None,
		"argument_overrides": None,
	}
