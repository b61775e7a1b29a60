"""The leader's firing pipeline: prepare what is due ahead of its moment, release it at its moment.

*Prepare*: the schedules due within `prepare_ahead_secs` are read, planned
(`planner`, pure) and written through the prepare script: each slot claimed
and its job written, on no queue yet. *Release*: at each moment the release
script pushes the jobs prepared for it. Every Redis write goes through
`State`; this module decides, logs one line per event, and reports to the
engine what it must act on (`Step`).
"""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass
from datetime import timedelta
from functools import lru_cache

from btu.scheduler_daemon.config import Config
from btu.scheduler_daemon.jobs import JobShape, JobTemplate, rq_time
from btu.scheduler_daemon.lease import Lease
from btu.scheduler_daemon.log import log_event
from btu.scheduler_daemon.metrics import Metrics
from btu.scheduler_daemon.outcomes import FireOutcome, ItemOutcome, JobOutcome
from btu.scheduler_daemon.planner import CACHE_SIZE, FireItem, Plan, Planner
from btu.scheduler_daemon.state import Acks, Due, ItemResult, Released, State, fire_record, text
from btu.shared import protocol
from btu.shared.instants import from_ms, slot_text

logger = logging.getLogger("btu.scheduler")

RELEASE_REASONS = {
	FireOutcome.RETURNED: "no leader was up at its moment; the schedule's catch-up policy decides",
}
# Released outcomes kept in a site's recent fires.
RECORDED = (FireOutcome.ENQUEUED, FireOutcome.SKIPPED_OVERLAP, FireOutcome.SKIPPED_CONCURRENCY)


@dataclass(frozen=True)
class Step:
	"""What a prepare or release asks of the engine."""

	fenced: bool = False  # another process holds the lease: nothing was written
	push_refused: bool = False  # a queue refused a push: its fires stay prepared, to be tried again shortly
	released: int = 0  # fires whose moment came (enqueued, skipped, returned, ...)
	resync: bool = False  # a state was moved aside: the reconcile rebuilds it from its row now


class FirePipeline:
	"""The leader's prepare and release, against `state` under `lease`; `clock` is Redis's time (engine.Clock);
	every outcome is counted in `metrics`."""

	def __init__(self, state: State, lease: Lease, config: Config, clock, metrics: Metrics | None = None):
		self.state = state
		self.metrics = metrics or Metrics()
		self.lease = lease
		self.config = config
		self.clock = clock  # Redis's time, estimated locally (engine.Clock)
		self.grace_ms = round(config.misfire_grace_secs * 1000)
		self.ahead_ms = round(config.prepare_ahead_secs * 1000)
		self.planner = Planner(lru_cache(maxsize=CACHE_SIZE)(self.make_shape))
		self.unacknowledged = (
			0  # fires released with no replica's acknowledgement in time, since the last one that had it
		)

	def make_shape(self, job_json: str, site: str) -> JobShape:
		"""The job shape of a state's job template on `site` (cached by the planner on both)."""
		return JobShape(self.state.redis, JobTemplate.from_dict(json.loads(job_json)), site)

	# -- release ---------------------------------------------------------------------

	def release(self) -> Step:
		"""Release every prepared fire whose moment has come, in batches, then record and log them."""
		done: list[Released] = []
		try:
			while True:
				batch = self.state.release(self.lease.value or "", self.config.release_batch_size, self.grace_ms)
				if batch.fenced:
					return Step(fenced=True, released=len(done))
				done += batch.fires
				if batch.acks is not None:
					self.note_acks(
						batch.acks,
						[
							(f.entry.site, f.entry.schedule, f.entry.slot_ms)
							for f in batch.fires
							if f.outcome == FireOutcome.ENQUEUED
						],
					)
				if batch.push_refused or len(batch.fires) < self.config.release_batch_size:
					return Step(push_refused=batch.push_refused, released=len(done))
		finally:
			if done:
				self.metrics.released(done)
				self.state.record_fires([(fire.entry.site, fire.record()) for fire in done if fire.outcome in RECORDED])
				log_released(done)

	# -- prepare ---------------------------------------------------------------------

	def prepare(self, due: Due) -> Step:
		"""Plan the due schedules' fires and write them ahead of their moments."""
		plan = self.planner.plan(
			from_ms(due.now_us // 1000),
			due.entries,
			self.state.read(due.entries),
			grace=timedelta(milliseconds=self.grace_ms),
			ahead=timedelta(milliseconds=self.ahead_ms),
		)
		self.set_aside(plan)
		self.metrics.planned(plan)
		if not plan.items:
			return Step(resync=bool(plan.corrupt))
		prepared = self.state.prepare(self.lease.value or "", rq_time(self.clock.now()), self.grace_ms, plan.items)
		if prepared.fenced:
			return Step(fenced=True)
		self.metrics.prepared(plan.items, prepared.results)
		self.record_duplicates(plan.items, prepared.results, prepared.now_ms)
		log_prepared(plan.items, prepared.results)
		return Step(
			resync=bool(plan.corrupt) or any(result.outcome == ItemOutcome.CORRUPT for result in prepared.results)
		)

	def note_acks(self, acks: Acks, fires: list[tuple[str, str, int]]) -> None:
		"""Log when replicas stop acknowledging fire writes (the first fire named) and when they resume (the count)."""
		if not fires:
			return
		if acks.short:
			if not self.unacknowledged:
				site, schedule, slot_ms = fires[0]
				log_event(
					logger,
					logging.WARNING,
					"replica_ack_missing",
					site=site,
					schedule=schedule,
					slot=slot_text(from_ms(slot_ms)),
					fires=len(fires),
					acked=acks.acked,
					wanted=acks.wanted,
					timeout_ms=self.state.replica_ack_timeout_ms,
					effect=(
						"fired anyway; if the master fails before a replica has them, "
						"they are planned again and the task runner refuses a slot it ran"
					),
				)
			self.unacknowledged += len(fires)
		elif self.unacknowledged:
			log_event(
				logger, logging.INFO, "replica_ack_restored", acked=acks.acked, unacknowledged_fires=self.unacknowledged
			)
			self.unacknowledged = 0

	def set_aside(self, plan: Plan) -> None:
		"""What cannot be planned leaves the due set: moved aside to be rebuilt, or reported as an invalid row."""
		self.state.drop_due(
			[(gone.site, gone.schedule, "") for gone in plan.gone]
			+ [(bad.site, bad.schedule, bad.fingerprint) for bad in plan.failed]
		)
		for bad in plan.corrupt:
			self.state.quarantine(
				protocol.schedule_key(bad.site, bad.schedule), bad.reason, site=bad.site, schedule=bad.schedule
			)
			log_event(
				logger,
				logging.ERROR,
				"state_quarantined",
				site=bad.site,
				schedule=bad.schedule,
				reason=bad.reason,
				effect="rebuilt from its database row",
			)
		for bad in plan.failed:
			log_event(
				logger,
				logging.ERROR,
				"fire_failed",
				exc_info=bad.error,
				site=bad.site,
				schedule=bad.schedule,
				error=bad.reason,
			)
			self.state.set_invalid(bad.site, {bad.schedule: bad.reason}, replace=False)

	def record_duplicates(self, items: list[FireItem], results: list[ItemResult], now_ms: int) -> None:
		"""A slot whose job exists already (a fire of another leader) goes into the recent fires as a duplicate."""
		self.state.record_fires(
			[
				(
					item.site,
					fire_record(
						item.schedule, job.slot_ms, now_ms, now_ms - job.fire_at_ms, job.job_id, JobOutcome.DUPLICATE
					),
				)
				for item, result in zip(items, results)
				for job, job_outcome in zip(item.jobs, result.jobs)
				if job_outcome == JobOutcome.DUPLICATE
			]
		)


def log_prepared(items: list[FireItem], results: list[ItemResult]) -> None:
	"""One line per event of a prepare: quarantined, failed, stale, duplicate, missed, finished."""
	for item, result in zip(items, results):
		if result.outcome == ItemOutcome.CORRUPT:
			log_event(
				logger,
				logging.ERROR,
				"state_quarantined",
				site=item.site,
				schedule=item.schedule,
				reason="its state is not a hash",
				effect="rebuilt from its database row",
			)
			continue
		if result.outcome == ItemOutcome.FAILED:
			log_event(
				logger,
				logging.ERROR,
				"prepare_failed",
				site=item.site,
				schedule=item.schedule,
				error=result.error,
				effect="its slot stays unclaimed; tried again",
			)
			continue
		if not logger.isEnabledFor(logging.INFO):
			continue
		if result.outcome == ItemOutcome.STALE:
			log_event(
				logger,
				logging.INFO,
				"fire_stale",
				site=item.site,
				schedule=item.schedule,
				reason="its slot moved meanwhile (edited, or fired by another leader)",
			)
			continue
		log_prepared_item(item, result)


def log_prepared_item(item: FireItem, result: ItemResult) -> None:
	"""The INFO lines of an item prepared: its jobs found to exist already, its slots skipped on request, the slots it
	missed, and its end when it has no next slot."""
	for job, job_outcome in zip(item.jobs, result.jobs):
		if job_outcome == JobOutcome.DUPLICATE:
			log_event(
				logger,
				logging.INFO,
				JobOutcome.DUPLICATE,
				site=item.site,
				schedule=item.schedule,
				slot=slot_text(from_ms(job.slot_ms)),
				job_id=job.job_id,
				reason="a job of this id exists already",
			)
	for slot_ms in item.skipped_by_request:
		log_event(
			logger,
			logging.INFO,
			"skipped_by_request",
			site=item.site,
			schedule=item.schedule,
			slot=slot_text(from_ms(slot_ms)),
		)
	if item.skipped or item.expired:
		extra = {"counted": "at least (counting stopped at its budget)"} if item.count_truncated else {}
		log_event(
			logger,
			logging.INFO,
			"missed",
			site=item.site,
			schedule=item.schedule,
			skipped=item.skipped,
			expired=item.expired,
			**extra,
		)
	if not item.next_cursor:
		log_event(logger, logging.INFO, "schedule_finished", site=item.site, schedule=item.schedule)


def log_released(released: list[Released]) -> None:
	"""One line per released fire: fire, skipped_overlap, skipped_concurrency, returned, quarantined or push_refused."""
	for fire in released:
		if fire.outcome in (FireOutcome.QUARANTINED, FireOutcome.PUSH_REFUSED):
			# Never parsed: a quarantined member may be anything.
			log_event(
				logger,
				logging.ERROR,
				"fire_" + fire.outcome,
				member=text(fire.member)[:200],
				reason=fire.reason,
				effect="moved aside; see btu-scheduler status"
				if fire.outcome == FireOutcome.QUARANTINED
				else "kept prepared; tried again",
			)
			continue
		if not logger.isEnabledFor(logging.INFO):
			continue
		entry = fire.entry
		extra = {"reason": RELEASE_REASONS[fire.outcome]} if fire.outcome in RELEASE_REASONS else {}
		if fire.outcome == FireOutcome.SKIPPED_CONCURRENCY:
			extra = {
				"task": entry.task,
				"limit": entry.max_concurrent,
				"reason": "the task has that many jobs queued or started",
			}
		log_event(
			logger,
			logging.INFO,
			"fire" if fire.outcome == FireOutcome.ENQUEUED else fire.outcome,
			site=entry.site,
			schedule=entry.schedule,
			slot=slot_text(from_ms(entry.slot_ms)),
			lag_ms=fire.lag_ms,
			job_id=entry.job_id,
			**extra,
		)
