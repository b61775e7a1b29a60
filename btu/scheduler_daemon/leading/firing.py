"""The leader's firing pipeline: prepare what is due ahead of its moment, release it at its moment.

*Prepare*: the schedules due within `prepare_ahead_secs` are read, planned
(`planner`, pure) and written through the prepare script: each slot claimed
and its job written, on no queue yet. *Release*: at each moment the release
script pushes the jobs prepared for it. Every Redis write goes through
`State`; this module decides, logs one line per event, and reports to the
engine what it must act on (`Step`); `fire_log` says it.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import timedelta
from functools import lru_cache

from btu.scheduler_daemon.leading.fire_log import (
	log_acks_missing,
	log_acks_restored,
	log_fire_failed,
	log_prepared,
	log_released,
	log_state_quarantined,
)
from btu.scheduler_daemon.leading.lease import Lease
from btu.scheduler_daemon.leading.planner import CACHE_SIZE, Plan, Planner
from btu.scheduler_daemon.operations.config import Config
from btu.scheduler_daemon.operations.metrics import Metrics
from btu.scheduler_daemon.store.fires import FireItem
from btu.scheduler_daemon.store.jobs import JobShape, JobTemplate, rq_time
from btu.scheduler_daemon.store.outcomes import FireOutcome, ItemOutcome, JobOutcome
from btu.scheduler_daemon.store.state import Acks, Due, ItemResult, Released, State, fire_record
from btu.shared.instants import from_ms

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
		self.planner = Planner(lru_cache(maxsize=CACHE_SIZE)(self.make_shape), state.keys.namespace)
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
				log_acks_missing(fires, acks, self.state.replica_ack_timeout_ms)
			self.unacknowledged += len(fires)
		elif self.unacknowledged:
			log_acks_restored(acks, self.unacknowledged)
			self.unacknowledged = 0

	def set_aside(self, plan: Plan) -> None:
		"""What cannot be planned leaves the due set: moved aside to be rebuilt, or reported as an invalid row."""
		self.state.drop_due(
			[(gone.site, gone.schedule, "") for gone in plan.gone]
			+ [(bad.site, bad.schedule, bad.fingerprint) for bad in plan.failed]
		)
		for bad in plan.corrupt:
			self.state.quarantine(
				self.state.keys.schedule_key(bad.site, bad.schedule), bad.reason, site=bad.site, schedule=bad.schedule
			)
			log_state_quarantined(bad.site, bad.schedule, bad.reason)
		for bad in plan.failed:
			log_fire_failed(bad)
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
