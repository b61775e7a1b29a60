"""Planning fires: the state of each due schedule in, the fires to prepare out.

Pure: no Redis, no clock. The leader reads the state of the schedules due
within `prepare_ahead_secs` (`State.read`) and hands it here with Redis's
time; what comes back is what the prepare script writes (`FireItem`) and,
by reason, what could not be planned. A unit test drives it with plain values.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from functools import lru_cache

from btu.scheduler_daemon.store.fires import DueEntry, FireItem, FireJob
from btu.scheduler_daemon.store.jobs import JobShape, job_id
from btu.shared.instants import from_ms, to_ms
from btu.shared.schedule import ScheduleSpec
from btu.shared.schedule.zones import posix_seconds

# Compiled specs and job shapes, by their stored JSON. Bounded, so memory stays
# flat however many schedules there are; a miss costs one JSON parse.
CACHE_SIZE = 10_000


@dataclass(frozen=True)
class Unplanned:
	"""A due schedule that could not be planned, and why."""

	site: str
	schedule: str
	reason: str
	error: Exception | None = None  # what planning raised, for its traceback
	fingerprint: str = ""  # the state's, as read: it leaves the due set only if no upsert changed it since


@dataclass
class Plan:
	"""What to prepare, and what to do with the schedules that cannot be planned."""

	items: list[FireItem] = field(default_factory=list)
	gone: list[DueEntry] = field(default_factory=list)  # removed meanwhile: off the due set
	corrupt: list[Unplanned] = field(
		default_factory=list
	)  # a wrong value in its state: moved aside, rebuilt from its row
	failed: list[Unplanned] = field(
		default_factory=list
	)  # its spec raised: off the due set, an invalid row until edited


@lru_cache(maxsize=CACHE_SIZE)
def load_spec(fingerprint: str, spec_json: str) -> ScheduleSpec:
	"""The spec a state holds, compiled once per fingerprint (the cache key; the JSON is what is compiled)."""
	return ScheduleSpec.from_dict(json.loads(spec_json))


class Planner:
	"""Plans fires; `load_shape(job_json, site)` makes the job shape a schedule's state names; `namespace` is the
	bench's, which its job ids carry."""

	def __init__(self, load_shape: Callable[[str, str], JobShape], namespace: str | None = None):
		self.load_shape = load_shape
		self.namespace = namespace

	def plan(
		self, now: datetime, due: list[DueEntry], states: list[dict | Exception], *, grace: timedelta, ahead: timedelta
	) -> Plan:
		"""`states`: each due schedule's state fields (`State.read`), or the error reading it raised."""
		plan = Plan()
		for entry, state in zip(due, states):
			if isinstance(state, dict) and not state.get("cursor") and not state.get("spec"):
				plan.gone.append(entry)
				continue
			try:
				spec, shape, cursor, runs = self.parse(entry.site, state)
			except ValueError as exc:
				plan.corrupt.append(Unplanned(entry.site, entry.schedule, str(exc)))
				continue
			try:
				plan.items.append(
					self.fires(entry, state["cursor"], spec, shape, cursor, runs, now, grace=grace, ahead=ahead)
				)
			except Exception as exc:
				# A schedule that cannot be planned must not spin the loop: the caller takes it off the due set.
				reason = f"cannot be fired: {type(exc).__name__}: {exc}"
				plan.failed.append(Unplanned(entry.site, entry.schedule, reason, exc, state.get("fingerprint") or ""))
		return plan

	def parse(self, site: str, state: dict | Exception) -> tuple[ScheduleSpec, JobShape, datetime, int]:
		"""(spec, job shape, cursor, runs) from a schedule's state; ValueError naming what is wrong in it."""
		if isinstance(state, Exception):
			raise ValueError(str(state))
		cursor, runs = state.get("cursor") or "", state.get("runs") or "0"
		if not cursor.isdigit() or not runs.lstrip("-").isdigit():
			raise ValueError(f"cursor {cursor[:40]!r} or runs {runs[:40]!r} is not a number")
		try:
			spec = load_spec(state["fingerprint"], state["spec"])
			shape = self.load_shape(state["job"], site)
		except (ValueError, TypeError, KeyError, AttributeError) as exc:
			raise ValueError(
				f"spec or job is not what the reconcile writes: {type(exc).__name__}: {str(exc)[:200]}"
			) from exc
		try:
			return spec, shape, from_ms(cursor), int(runs)
		except OverflowError as exc:
			raise ValueError(f"cursor {cursor[:40]!r} is out of range") from exc

	def fires(
		self,
		entry: DueEntry,
		stored_cursor: str,
		spec: ScheduleSpec,
		shape: JobShape,
		cursor: datetime,
		runs: int,
		now: datetime,
		*,
		grace: timedelta,
		ahead: timedelta,
	) -> FireItem:
		"""The fires of one schedule from its cursor up to `now + ahead`, its catch-up policy applied."""
		plan = spec.plan(cursor, now, runs=runs, grace=grace, ahead=ahead)
		jobs = []
		for slot in plan.fire:
			fire_at = spec.fire_time(slot)
			description, data = shape.fire_fields(entry.schedule, slot, fire_at)
			jobs.append(
				FireJob(
					to_ms(slot),
					to_ms(fire_at),
					job_id(entry.site, entry.schedule, slot, self.namespace),
					shape,
					description,
					data,
				)
			)
		finished = plan.finished or plan.next_cursor is None
		# The rule never yields a skipped slot: those this plan passed over, for the log and metrics.
		passed = []
		if spec.skipped:
			passed_until = (
				math.floor((now + ahead).timestamp()) + 1
				if finished
				else posix_seconds(plan.next_cursor, "next_cursor")
			)
			since = math.ceil(cursor.timestamp())
			passed = [slot * 1000 for slot in spec.skipped if since <= slot < passed_until]
		return FireItem(
			site=entry.site,
			schedule=entry.schedule,
			expected_cursor=stored_cursor,
			next_cursor="" if finished else str(to_ms(plan.next_cursor)),
			next_fire_at="0" if finished else str(to_ms(spec.fire_time(plan.next_cursor))),
			overlap_skip=spec.overlap_policy == "skip",
			skipped=plan.skipped,
			expired=plan.expired,
			jobs=jobs,
			count_truncated=plan.count_truncated,
			skipped_by_request=passed,
			task=shape.template.task,
			max_concurrent=shape.template.max_concurrent,
		)
