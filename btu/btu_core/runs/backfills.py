"""Backfills: a schedule's past slots between two moments, each as a BTU Run Request (named per slot, so a slot asked
twice, or one that ran, adds nothing), one at a time or all at once; `release_next` makes the next waiting one due
after each run.
"""

from __future__ import annotations

from datetime import datetime, timedelta

import frappe
from frappe import _
from frappe.utils import cint, flt

from btu.btu_core.instants import to_system_naive, utc_now
from btu.btu_core.runs.run_requests import announce, insert
from btu.btu_core.scheduler_link import announce_after_commit
from btu.btu_core.sealed import store
from btu.shared import protocol
from btu.shared import run_requests as rr
from btu.shared.instants import format_utc_iso, parse_utc_iso
from btu.shared.run_kind import RunKey, RunKind


def backfill(schedule, start: datetime, end: datetime, one_at_a_time: bool = True) -> dict:
	"""Request a run of each of the schedule's slots from `start` to `end` (aware, UTC) that has no Task Log.

	Refused (frappe.ValidationError naming the bound) above MAX_BACKFILL_SLOTS slots. One at a time: each
	slot's request waits for the run before it; else all are due now. A slot already requested keeps
	its request, so asking twice adds nothing."""
	now = utc_now()
	if end <= start:
		frappe.throw(
			_("Backfill: end {0} is not after start {1}; give a range of past time").format(
				format_utc_iso(end), format_utc_iso(start)
			)
		)
	if end > now:
		frappe.throw(
			_("Backfill: end {0} is in the future; slots to come fire on their own (give an end before {1})").format(
				format_utc_iso(end), format_utc_iso(now)
			)
		)
	slots = slots_between(schedule, start, end)
	texts = [format_utc_iso(s) for s in slots]
	ran = slots_that_ran(schedule.name, texts)
	backfill_id = frappe.generate_hash(length=10)
	requested, existing, previous = [], [], None
	for slot, text in zip(slots, texts):
		if text in ran:
			continue
		name = rr.slot_request_name(schedule.name, slot, 1)
		waiting = one_at_a_time and previous is not None
		doc, inserted = insert(
			name,
			task=schedule.task,
			origin=rr.BACKFILL,
			schedule=schedule.name,
			slot_utc=text,
			attempt=1,
			run_at=now,
			status=rr.WAITING if waiting else rr.PENDING,
			previous_request=previous if waiting else None,
			backfill=backfill_id,
			note=_("Backfill {0} of {1} from {2} to {3}.").format(
				backfill_id, schedule.name, format_utc_iso(start), format_utc_iso(end)
			),
		)
		(requested if inserted else existing).append(doc.name)
		if inserted:
			previous = doc.name
	return {
		"backfill": backfill_id,
		"slots": len(slots),
		"requested": requested,
		"already_requested": existing,
		"already_ran": sorted(ran),
	}


def slots_between(schedule, start: datetime, end: datetime) -> list[datetime]:
	"""The schedule's slots from `start` to `end`; refused above MAX_BACKFILL_SLOTS."""
	# Imported here for the run path's sake, as in next_regular_fire.
	from btu.btu_core.schedules.spec import spec_of

	spec = spec_of(schedule)
	slots = []
	slot = spec.next_slot(start - timedelta(seconds=1))
	while slot is not None and slot <= end:
		if len(slots) == rr.MAX_BACKFILL_SLOTS:
			frappe.throw(
				_("Backfill: {0} to {1} holds more than {2} slots of {3}; backfill a shorter range at a time").format(
					format_utc_iso(start), format_utc_iso(end), rr.MAX_BACKFILL_SLOTS, schedule.name
				)
			)
		slots.append(slot)
		slot = spec.next_slot(slot)
	return slots


def slots_that_ran(schedule: str, texts: list[str]) -> set[str]:
	"""Which of the slots `texts` (UTC ISO) of `schedule` have a Task Log, read 500 at a time."""
	ran = set()
	for chunk in range(0, len(texts), 500):
		ran |= set(
			frappe.get_all(
				"BTU Task Log",
				filters={"schedule": schedule, "slot_utc": ("in", texts[chunk : chunk + 500])},
				pluck="slot_utc",
			)
		)
	return ran


def release_next(request) -> str | None:
	"""A backfill run one at a time: the request waiting on this one becomes due now. Returns its name."""
	# Plain SQL: this follows every request's run, and frappe.db.get_value would load Frappe's query engine.
	rows = frappe.db.sql(
		f"select name from `tab{rr.DOCTYPE}` where previous_request = %s and status = %s limit 1",
		(request.name, rr.WAITING),
	)
	if not rows:
		return None
	name = rows[0][0]
	now = rr.whole_second_after(utc_now())
	frappe.db.set_value(
		rr.DOCTYPE, name, {"status": rr.PENDING, "run_at": to_system_naive(now), "run_at_utc": format_utc_iso(now)}
	)
	announce(name)
	return name
