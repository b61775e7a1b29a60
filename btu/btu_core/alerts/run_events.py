"""What a run tells alerts: `run_started` (late start), `run_finished` (failure, failures in a row, recovery, and
pause on failure), called by the task runner after the call."""

from __future__ import annotations

import frappe
from frappe import _
from frappe.utils import cint

from btu.btu_core.alerts.incidents import guarded, open_incident, resolve
from btu.btu_core.alerts.pause import pause_for_failures
from btu.btu_core.alerts.rules import FAILED, SCHEDULE, own_scope, rules_for, threshold, watched


def run_started(log, task, schedule, start_lag_secs: float | None) -> None:
	"""Late start: a scheduled run whose function was called more than a rule's threshold after its fire time (slot +
	jitter; a retry's or backfill's request: its run_at). Told after the call: nothing here may delay the run."""
	if schedule is not None and start_lag_secs is not None and log.slot_utc and watched(task, schedule):
		guarded(late_start, log, task, schedule, start_lag_secs)


def late_start(log, task, schedule, lag: float) -> None:
	for rule in rules_for(("Late Start",), task.name, schedule.name):
		scope = own_scope(rule)
		if lag > threshold(rule):
			message = _("Run {0} of {1} slot {2} started {3:.1f} s after its fire time (threshold {4} s).").format(
				log.name, schedule.name, log.slot_utc, lag, threshold(rule)
			)
			open_incident(rule, task.name, scope, message, key=log.name, log=log.name)
		else:
			resolve(rule, scope, _("Run {0} started {1:.1f} s after its fire time.").format(log.name, lag))


def run_finished(log, task, schedule=None, *, final: bool = True) -> None:
	"""A run's end: failure, consecutive failures and recovery alerts, and pause on failure. Never raises.

	`final`: no retry follows this run. A failure that will be retried (final=False) neither counts toward
	a streak nor alerts; only its last attempt does.
	"""
	if (
		log.status == "Succeeded"
		and not watched(task, schedule)
		and not (schedule is not None and cint(schedule.get("failure_streak")))
	):
		return  # no incident to resolve, no streak to end: not a statement more after every successful run
	if log.status == "Succeeded" or (log.status in FAILED and final):
		guarded(finished, log, task, schedule)


def finished(log, task, schedule) -> None:
	failed = log.status in FAILED
	streak = bump_streak(schedule.name, failed) if schedule else 0
	rules = (
		rules_for(("Failure", "Consecutive Failures"), task.name, schedule.name if schedule else None)
		if watched(task, schedule)
		else []
	)
	for rule in rules:
		scope = own_scope(rule)
		if not failed:
			resolve(rule, scope, _("Run {0} succeeded.").format(log.name))
			continue
		count = streak if rule.parenttype == SCHEDULE else task_streak(task.name, threshold(rule))
		if rule.event == "Failure" or count >= threshold(rule):
			# Never what the run raised: an incident's message is a column of its own (and a Version's, a bell's), which
			# any user's get_count reads on v15 (docs/SECURITY.md, sealed values); the run's own mail may carry it.
			message = _("Run {0} of {1} {2}: {3}").format(log.name, task.name, _(log.status).lower(), _("see its Log"))
			if rule.event == "Consecutive Failures":
				message = _("{0} failed runs in a row. {1}").format(count, message)
			open_incident(rule, task.name, scope, message, key=log.name, log=log.name)
	limit = cint(schedule.get("pause_after_failures")) if schedule else 0
	if failed and limit and streak >= limit:
		pause_for_failures(schedule, task, streak, log)


def bump_streak(schedule: str, failed: bool) -> int:
	"""The schedule's failed runs in a row, this one counted (a success ends it)."""
	if not failed:
		frappe.db.sql(
			"update `tabBTU Task Schedule` set failure_streak = 0 where name = %s and failure_streak != 0", schedule
		)
		return 0
	frappe.db.sql("update `tabBTU Task Schedule` set failure_streak = failure_streak + 1 where name = %s", schedule)
	# Plain SQL: frappe.db.get_value would load Frappe's query engine in the work-horse, after every scheduled run.
	rows = frappe.db.sql(f"select failure_streak from `tab{SCHEDULE}` where name = %s", schedule)
	return cint(rows[0][0]) if rows else 0


def task_streak(task: str, up_to: int) -> int:
	"""The Task's newest finished runs that failed in a row, counted up to `up_to`."""
	statuses = frappe.get_all(
		# An attempt that was retried is not a run's end: only its last attempt counts.
		"BTU Task Log",
		filters={"task": task, "status": ("in", ("Succeeded", *FAILED)), "retried": 0},
		pluck="status",
		order_by="creation desc",
		limit=up_to,
	)
	return next((i for i, status in enumerate(statuses) if status not in FAILED), len(statuses))
