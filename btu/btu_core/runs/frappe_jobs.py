"""A Frappe Scheduled Job Type's slot run by BTU (kind FRAPPE_JOB; BTU Configuration's "Fire Frappe's Scheduled Jobs"):
`run` runs the job type's own `execute()`, so it leaves the same Scheduled Job Log, `last_execution` and server-script
events as when Frappe's scheduler enqueues it.

Around a switch both BTU and Frappe's scheduler may reach one slot; each claims it first (`claim`, the rule of
`btu.shared.scheduled_jobs`), so it runs once. Frappe's side of it is `btu.btu_core.schedules.scheduled_job_types`.
"""

from __future__ import annotations

from datetime import datetime, timezone
from zoneinfo import ZoneInfo

import frappe
from frappe.utils import get_system_timezone

from btu.shared import scheduled_jobs as shared
from btu.shared.instants import parse_utc_iso, slot_text
from btu.shared.schedule import ScheduleError, ScheduleSpec


def scheduler_interval():
	return frappe.get_conf().scheduler_interval


def claim(job_type: str, slot: datetime, owner: str) -> bool:
	"""Own the job type's slot for `owner` (scheduled_jobs.FRAPPE or BTU): True if it was free or is already ours."""
	key = frappe.cache.make_key(shared.claim_key(job_type, slot))
	if frappe.cache.set(key, owner, nx=True, ex=shared.CLAIM_TTL_SECS):
		return True
	held = frappe.cache.get(key)
	return (held.decode() if isinstance(held, bytes) else held) == owner


def as_utc(value) -> datetime | None:
	"""A Datetime column (naive, in the site's zone) as aware UTC."""
	if not value:
		return None
	moment = frappe.utils.get_datetime(value)
	if moment.tzinfo is None:
		moment = moment.replace(tzinfo=ZoneInfo(get_system_timezone()))
	return moment.astimezone(timezone.utc)


def due_slot(job) -> datetime | None:
	"""The slot a tick finds due: the row's first cron moment after its last run, in the site's zone, as the
	scheduler plans it (BTU's own cron and DST rule, so both sides name one slot alike)."""
	row = shared.JobTypeRow.of(job.as_dict(), scheduler_interval())
	try:
		spec = ScheduleSpec.from_row(row.spec_columns(), system_time_zone=get_system_timezone())
	except ScheduleError:
		return None
	return spec.next_slot(as_utc(job.last_execution or job.creation))


def log(job_type: str, slot: datetime | None, event: str, detail: str = "") -> None:
	frappe.logger("btu").info(
		f"site={frappe.local.site} frappe_job={job_type} slot={slot_text(slot) if slot else '-'} "
		f"{event}{' ' + detail if detail else ''}"
	)


def run(job_type: str, slot: str) -> None:
	"""BTU's job for one slot of a Scheduled Job Type: run it once, unless it ran since (Frappe's scheduler took the
	slot, or this is a second delivery) or was stopped, deleted or switched back to Frappe meanwhile."""
	slot = parse_utc_iso(slot, "slot")
	if not frappe.db.exists(shared.DOCTYPE, job_type):
		return log(job_type, slot, "not_run", "reason=deleted")
	job = frappe.get_doc(shared.DOCTYPE, job_type)
	if job.stopped:
		return log(job_type, slot, "not_run", "reason=stopped")
	last = as_utc(job.last_execution)
	if last is not None and last >= slot:
		return log(job_type, slot, "not_run", f"reason=already_ran last_execution={slot_text(last)}")
	if not claim(job_type, slot, shared.BTU):
		return log(job_type, slot, "not_run", "reason=claimed_by_frappe_scheduler")
	log(job_type, slot, "run")
	job.execute()
