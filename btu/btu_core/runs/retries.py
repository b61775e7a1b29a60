"""A failed run's retry: the Task's retry policy (the schedule's overrides on it), whether this failure is retried,
and the next attempt's BTU Run Request, named per (slot, attempt) or (chain link, attempt) so that a second ask adds
nothing. What a BTU job raises when its run failed (`RunFailed`) is here too: it must not be what Frappe retries
in-process.
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

RETRY_FIELDS = ("max_attempts", "retry_on", "retry_delay_secs", "retry_backoff_factor", "retry_max_delay_secs")


def retry_policy(task, schedule=None) -> dict:
	"""The Task's retry settings, each overridden by the schedule's when it sets one (0 or blank: the Task's)."""
	policy = {
		"max_attempts": max(1, cint(task.get("max_attempts")) or 1),
		"retry_on": task.get("retry_on") or "Any Failure",
		"retry_delay_secs": cint(task.get("retry_delay_secs")),
		"retry_backoff_factor": flt(task.get("retry_backoff_factor")) or 1.0,
		"retry_max_delay_secs": cint(task.get("retry_max_delay_secs")),
	}
	if schedule is not None:
		for field in RETRY_FIELDS:
			value = schedule.get(field)
			if value not in (None, "", 0, 0.0):
				policy[field] = value
	return policy


class RunFailed(Exception):
	"""What a BTU job raises when its run failed (task_runner): its Log, and BTU's retry, are written. It names the Log
	and the exception's kind only: Frappe's execute_job logs what a job raised with every frame's variables (the
	arguments among them) in an Error Log, a row any user's get_count reads on v15; and it is none of what
	execute_job retries in-process (`retry_signal`), which would run the job again."""


# The attribute naming the Log on an exception a run recorded there (`recorded`).
RECORDED_IN = "btu_log"


def recorded(exc: BaseException, log: str) -> BaseException:
	"""`exc`, marked as the failure recorded in the Log (or request) `log`; the job's entry point raises RunFailed."""
	setattr(exc, RECORDED_IN, log)
	return exc


def retry_signal(exc: BaseException | None) -> bool:
	"""What Frappe's own execute_job retries: RetryBackgroundJobError, a deadlock or a lock wait timeout."""
	if exc is None:
		return False
	if isinstance(exc, frappe.RetryBackgroundJobError):
		return True
	try:
		return isinstance(exc, frappe.db.InternalError) and bool(
			frappe.db.is_deadlocked(exc) or frappe.db.is_timedout(exc)
		)
	except Exception:
		return False


def retries(policy: dict, status: str, exc: BaseException | None) -> bool:
	"""Whether a run that ended `status` (raising `exc`, None for a lost run) is retried under `policy`'s retry_on."""
	if status not in ("Failed", "Timed Out"):
		return False
	on = policy["retry_on"]
	if on == "Timeout":
		return status == "Timed Out"
	if on == "Retry Signal":
		return retry_signal(exc)
	return True


def schedule_retry(run, log, task, schedule, exc: BaseException | None) -> tuple[str | None, bool]:
	"""After a failed attempt: insert the next attempt's request when the policy allows. Returns the note for the
	Log ("attempt 2 of 3 at ...", or why none follows; None when retries are off for this run) and whether one
	follows."""
	policy = retry_policy(task, schedule)
	attempt = cint(log.get("attempt")) or 1
	if policy["max_attempts"] <= 1 or not retries(policy, log.status, exc):
		return None, False
	if attempt >= policy["max_attempts"]:
		return _("Attempt {0} of {1}: no retry left.").format(attempt, policy["max_attempts"]), False
	key = run.retry_key(attempt + 1)
	if key is None:
		return _("Not retried: only scheduled, backfilled and chained runs are (Run Now has no slot to retry)."), False
	delay = rr.retry_delay(
		attempt + 1, policy["retry_delay_secs"], flt(policy["retry_backoff_factor"]), policy["retry_max_delay_secs"]
	)
	# From now, just after the failed attempt's Log committed its end (Date Time Ended), kept to the millisecond.
	run_at = utc_now() + timedelta(seconds=delay)
	if schedule is not None and log.get("slot_utc") and schedule.overlap_policy == "skip":
		following = next_regular_fire(schedule, parse_utc_iso(log.slot_utc, "slot_utc"))
		if following is not None and run_at >= following:
			return _(
				"Not retried: attempt {0} would start at {1}, at or after the next slot's fire at {2} (overlap_policy "
				"skip)."
			).format(attempt + 1, format_utc_iso(run_at), format_utc_iso(following)), False
	first = log.get("first_attempt_log") or log.name
	doc, _inserted = insert(
		key,
		task=task.name,
		origin=rr.RETRY,
		schedule=schedule.name if schedule is not None else None,
		slot_utc=log.get("slot_utc"),
		attempt=attempt + 1,
		run_at=run_at,
		exact=True,
		parent_log=log.name,
		first_log=first,
		status=rr.PENDING,
		note=_("Retry of {0} ({1}).").format(log.name, log.status),
		**(lineage_of(run.request) if run.request is not None else {}),
	)
	return _("Attempt {0} of {1} failed; attempt {2} at {3} ({4}).").format(
		attempt, policy["max_attempts"], attempt + 1, doc.run_at_utc, doc.name
	), True


def lineage_of(request) -> dict:
	"""What a retry keeps of the request of the attempt it follows: its backfill, and its chain's root and depth (a
	chained run's retry is bounded as the run it retries)."""
	return {field: request.get(field) for field in ("backfill", "chain_root", "chain_depth")}


def next_regular_fire(schedule, slot: datetime) -> datetime | None:
	"""When the schedule's slot after `slot` fires (jitter included), or None when none follows."""
	# Imported here, not with this module: the task runner imports it before every run's call, and a spec loads the
	# schedule rules (croniter), which only a failed attempt's retry needs, after the call.
	from btu.btu_core.schedules.spec import spec_of

	try:
		# Its skipped slots with it: a run reads its Schedule as a row, without child tables.
		spec = spec_of(frappe.get_doc("BTU Task Schedule", schedule.name))
	except Exception:
		return None
	following = spec.next_slot(slot)
	return spec.fire_time(following) if following is not None else None
