"""What a fire's log lines say: one line per event of a prepare or a release (`firing.FirePipeline` decides when).

Quarantined states and fires, failed plans and prepares, stale items, duplicates, slots skipped on request or missed,
schedules finished, each fire released, and replicas that stop or resume acknowledging the fires' writes.
"""

from __future__ import annotations

import logging

from btu.scheduler_daemon.leading.planner import Unplanned
from btu.scheduler_daemon.log import log_event
from btu.scheduler_daemon.store.fires import FireItem
from btu.scheduler_daemon.store.outcomes import FireOutcome, ItemOutcome, JobOutcome
from btu.scheduler_daemon.store.state import Acks, ItemResult, Released, text
from btu.shared.instants import from_ms, slot_text

logger = logging.getLogger("btu.scheduler")

RELEASE_REASONS = {
	FireOutcome.RETURNED: "no leader was up at its moment; the schedule's catch-up policy decides",
}


def log_state_quarantined(site: str, schedule: str, reason: str) -> None:
	log_event(
		logger,
		logging.ERROR,
		"state_quarantined",
		site=site,
		schedule=schedule,
		reason=reason,
		effect="rebuilt from its database row",
	)


def log_fire_failed(bad: Unplanned) -> None:
	log_event(
		logger,
		logging.ERROR,
		"fire_failed",
		exc_info=bad.error,
		site=bad.site,
		schedule=bad.schedule,
		error=bad.reason,
	)


def log_acks_missing(fires: list[tuple[str, str, int]], acks: Acks, timeout_ms: int) -> None:
	"""Replicas stopped acknowledging the fires' writes: the first fire named."""
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
		timeout_ms=timeout_ms,
		effect=(
			"fired anyway; if the master fails before a replica has them, "
			"they are planned again and the task runner refuses a slot it ran"
		),
	)


def log_acks_restored(acks: Acks, unacknowledged: int) -> None:
	log_event(logger, logging.INFO, "replica_ack_restored", acked=acks.acked, unacknowledged_fires=unacknowledged)


def log_prepared(items: list[FireItem], results: list[ItemResult]) -> None:
	"""One line per event of a prepare: quarantined, failed, stale, duplicate, missed, finished."""
	for item, result in zip(items, results):
		if result.outcome == ItemOutcome.CORRUPT:
			log_state_quarantined(item.site, item.schedule, "its state is not a hash")
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
