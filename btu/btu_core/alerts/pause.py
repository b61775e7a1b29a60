"""Pause on failure: a schedule paused after `pause_after_failures` failed runs in a row (its Paused alerts raised),
its streak kept across Desk saves, and its Paused incidents resolved when it is resumed."""

from __future__ import annotations

import frappe
from frappe import _
from frappe.utils import cint

from btu.btu_core import scheduler_link
from btu.btu_core.alerts.incidents import open_incident, resolve
from btu.btu_core.alerts.rules import SCHEDULE, rules_for
from btu.btu_core.instants import utc_now
from btu.shared import protocol
from btu.shared.instants import format_utc_iso


def pause_for_failures(schedule, task, streak: int, log) -> None:
	"""Pause the schedule (the scheduler is told after commit, as for a pause from the Desk) and raise its Paused
	alerts."""
	if cint(frappe.db.get_value(SCHEDULE, schedule.name, "paused")):
		return
	note = _(
		"Paused by BTU at {0} UTC after {1} failed runs in a row (pause_after_failures), the last {2}. Resuming "
		"clears the count."
	).format(format_utc_iso(utc_now()), streak, log.name)
	frappe.db.set_value(SCHEDULE, schedule.name, {"paused": 1, "pause_note": note})
	if cint(schedule.enabled):
		scheduler_link.announce_after_commit(protocol.CREATE_TASK_SCHEDULE, schedule.name)
	frappe.logger("btu").warning(
		f"site={frappe.local.site} schedule={schedule.name} paused after {streak} failures (log={log.name})"
	)
	for rule in rules_for(("Paused",), task.name, schedule.name):
		open_incident(rule, task.name, schedule.name, note, key=log.name, log=log.name)


def before_schedule_save(doc) -> None:
	"""Keep the streak the runs counted (the form's copy may be stale); resuming clears it."""
	before = doc.get_doc_before_save()
	resumed = before is not None and before.paused and not doc.paused
	doc.failure_streak = (
		0 if resumed or doc.is_new() else cint(frappe.db.get_value(SCHEDULE, doc.name, "failure_streak"))
	)


def after_schedule_save(doc) -> None:
	"""A resumed schedule's Paused incidents resolve."""
	before = doc.get_doc_before_save()
	if before is not None and before.paused and not doc.paused:
		for rule in rules_for(("Paused",), doc.task, doc.name):
			resolve(rule, doc.name, _("Resumed by {0}.").format(frappe.session.user))
