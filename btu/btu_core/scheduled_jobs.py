"""Frappe's Scheduled Job Types fired by BTU (BTU Configuration's "Fire Frappe's Scheduled Jobs").

Two halves, one rule (`btu.shared.scheduled_jobs`):

- BTU's job for a slot runs `run` here, which runs the Scheduled Job Type's own
  `execute()`: the same Scheduled Job Log, `last_execution` and server-script
  events as when Frappe's scheduler enqueues it.
- `ScheduledJobType` replaces Frappe's controller (hooks.py,
  `override_doctype_class`): Frappe's scheduler tick leaves a job type alone
  while BTU takes it (switched on, a row BTU can fire, and the leader of this
  bench's BTU scheduler acknowledging that it fires the site's job types now),
  and otherwise enqueues it as before. A manual "Execute" is never held back.

Around a switch both may reach one slot; each claims it first (`claim`), so
it runs once. Without a live acknowledgement (no scheduler, one that does not
fire this site's jobs: executor rq, BTU disabled, its database unreachable,
another bench's; or Redis failing) Frappe's scheduler goes on firing (the
claim keeps the slot once): a job is never left to nobody.
"""

from __future__ import annotations

from datetime import datetime, timezone
from zoneinfo import ZoneInfo

import frappe
from frappe.core.doctype.scheduled_job_type.scheduled_job_type import ScheduledJobType as FrappeScheduledJobType
from frappe.utils import cint, get_system_timezone

from btu.shared import scheduled_jobs as shared
from btu.shared import protocol
from btu.shared.instants import parse_utc_iso, slot_text
from btu.shared.run_kind import RunKey, RunKind
from btu.shared.schedule import ScheduleError, ScheduleSpec
from btu.btu_core import scheduler_link

SWITCH = "fire_frappe_jobs"


def switched_on() -> bool:
	return bool(cint(frappe.db.get_single_value("BTU Configuration", SWITCH)))


def scheduler_interval():
	return frappe.get_conf().scheduler_interval


def btu_takes(job) -> bool:
	"""Whether BTU fires this job type now, so Frappe's scheduler must not."""
	return (
		switched_on()
		and shared.fired_by_btu(job.method or "", job.frequency or "", job.cron_format, scheduler_interval())
		and scheduler_link.fires_frappe_jobs()
	)


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
	row = shared.as_schedule_row(job.as_dict(), scheduler_interval())
	try:
		spec = ScheduleSpec.from_row(row, system_time_zone=get_system_timezone())
	except ScheduleError:
		return None
	return spec.next_slot(as_utc(job.last_execution or job.creation))


def log(job_type: str, slot: datetime | None, event: str, detail: str = "") -> None:
	frappe.logger("btu").info(
		f"site={frappe.local.site} frappe_job={job_type} slot={slot_text(slot) if slot else '-'} {event}{' ' + detail if detail else ''}"
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


class ScheduledJobType(FrappeScheduledJobType):
	"""Frappe's Scheduled Job Type, whose scheduler tick leaves to BTU the job types BTU takes."""

	def enqueue(self, force=False) -> bool:
		if force:
			return super().enqueue(force=True)
		if btu_takes(self):
			return False
		# The tick's row may be old (Frappe reads it from its cache): a run BTU made since must count, also one made
		# before its switch went off. A later run only makes the job type less due, so the row is read again only
		# when the tick's says due: a tick of every site pays a read per job type due, not per job type.
		if not self.is_event_due():
			return False
		self.last_execution = frappe.db.get_value(shared.DOCTYPE, self.name, "last_execution")
		if not self.is_event_due():
			return False
		slot = due_slot(self)
		if slot is not None and not claim(self.name, slot, shared.FRAPPE):
			log(self.name, slot, "not_enqueued", "reason=claimed_by_btu")
			return False
		return super().enqueue()


def announce_all() -> None:
	"""After commit, tell a running scheduler to look at every Scheduled Job Type (the switch changed)."""
	for name in frappe.get_all(shared.DOCTYPE, pluck="name"):
		run = RunKey(RunKind.FRAPPE_JOB, name).format()
		scheduler_link.announce_after_commit(protocol.CREATE_TASK_SCHEDULE, run, only_if_running=True, quiet=True)


def job_type_changed(doc, method=None) -> None:
	"""doc_events: a Scheduled Job Type saved or deleted is told to the scheduler at once while BTU fires them."""
	if switched_on():
		request_type = protocol.CANCEL_TASK_SCHEDULE if method == "on_trash" else protocol.CREATE_TASK_SCHEDULE
		run = RunKey(RunKind.FRAPPE_JOB, doc.name).format()
		scheduler_link.announce_after_commit(request_type, run, only_if_running=True, quiet=True)
