"""Frappe's Scheduled Job Types while BTU fires them (BTU Configuration's "Fire Frappe's Scheduled Jobs").

`ScheduledJobType` replaces Frappe's controller (hooks.py, `override_doctype_class`): Frappe's scheduler tick leaves a
job type alone while BTU takes it (switched on, a row BTU can fire, and the leader of this bench's BTU scheduler
acknowledging that it fires the site's job types now), and otherwise enqueues it as before. A manual "Execute" is
never held back. Around a switch both may reach one slot; each claims it first (`btu.btu_core.runs.frappe_jobs.claim`),
so it runs once. Without a live acknowledgement (no scheduler, one that does not fire this site's jobs: executor rq,
BTU disabled, its database unreachable, another bench's; or Redis failing) Frappe's scheduler goes on firing (the
claim keeps the slot once): a job is never left to nobody. BTU's own run of a slot is `btu.btu_core.runs.frappe_jobs`.
"""

from __future__ import annotations

import frappe
from frappe.core.doctype.scheduled_job_type.scheduled_job_type import ScheduledJobType as FrappeScheduledJobType
from frappe.utils import cint

from btu.btu_core import scheduler_link
from btu.btu_core.runs.frappe_jobs import claim, due_slot, log, scheduler_interval
from btu.shared import protocol
from btu.shared import scheduled_jobs as shared
from btu.shared.run_kind import RunKey, RunKind

SWITCH = "fire_frappe_jobs"


def switched_on() -> bool:
	return bool(cint(frappe.db.get_single_value("BTU Configuration", SWITCH)))


def btu_takes(job) -> bool:
	"""Whether BTU fires this job type now, so Frappe's scheduler must not."""
	return (
		switched_on()
		and shared.fired_by_btu(job.method or "", job.frequency or "", job.cron_format, scheduler_interval())
		and scheduler_link.fires_frappe_jobs()
	)


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
