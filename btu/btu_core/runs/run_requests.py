"""Retries, backfills and chained runs: BTU Run Request rows the scheduler fires (`btu.shared.run_requests`).

Each is inserted under a name derived from what it is for, so a second ask
(a second worker, a second click, a failover that runs the asking code
again) finds the row and adds nothing. The scheduler is told after commit,
as for a schedule's save; its full reconcile reads pending requests anyway.
The task runner marks a request Done in the transaction that inserts its
run's "Started" Log.
"""

from __future__ import annotations

from datetime import datetime, timedelta

import frappe
from frappe import _
from frappe.utils import cint, flt

from btu.btu_core.instants import to_system_naive, utc_now
from btu.btu_core.scheduler_link import announce_after_commit
from btu.btu_core.sealed import store
from btu.shared import protocol
from btu.shared import run_requests as rr
from btu.shared.instants import format_utc_iso, parse_utc_iso
from btu.shared.run_kind import RunKey, RunKind

RETRY_FIELDS = ("max_attempts", "retry_on", "retry_delay_secs", "retry_backoff_factor", "retry_max_delay_secs")


def insert(name: str, *, run_at: datetime, exact: bool = False, **values) -> tuple[object, bool]:
	"""The request `name` (inserted with `values` unless there): (doc, whether this call inserted it).

	`run_at` is rounded up to a whole second unless `exact` (a retry's delay, enqueue_at's moment): then to the
	millisecond. The row alone is written (defaults, stamps, one INSERT): a BTU Run Request has no validation or hooks
	of its own and every caller checks its values, and enqueue_at is called in bulk from request handlers. A name
	already there, from this ask before or from another delivery that committed first, is the duplicate key."""
	run_at = rr.millisecond_after(run_at) if exact else rr.whole_second_after(run_at)
	doc = frappe.get_doc(
		{
			"doctype": rr.DOCTYPE,
			"name": name,
			"run_at": to_system_naive(run_at),
			"run_at_utc": format_utc_iso(run_at, milliseconds=bool(run_at.microsecond)),
			**values,
		}
	)
	doc._set_defaults()
	doc.set_user_and_timestamp()
	doc.set_docstatus()
	try:
		doc.db_insert()
	except frappe.DuplicateEntryError:
		# A locking read sees the row even when another transaction committed it after ours began.
		return frappe.get_doc(rr.DOCTYPE, name, for_update=True), False
	if doc.status == rr.PENDING:
		announce(name)
	return doc, True


def announce(name: str) -> None:
	"""Tell the scheduler about the request (or that it is no longer pending) once this transaction commits. Quietly:
	most are a run's own (its Done, its retry, its chain), in a worker with no one to show the reply to, where the
	realtime message would load Frappe's response encoder and Document on every run; the reply is logged."""
	run = RunKey(RunKind.RUN_REQUEST, name).format()
	announce_after_commit(protocol.CREATE_TASK_SCHEDULE, run, only_if_running=True, quiet=True)


# -- retries ----------------------------------------------------------------------


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


# -- chains ------------------------------------------------------------------------


def start_chained(log, task, request=None) -> tuple[list[str], str | None]:
	"""The Task's chained tasks for this run's outcome, each requested once per (this Log, that Task), as far as the
	chain's bounds allow (`rr.chained_runs_allowed`): the requests, and a note for the Log naming the tasks a bound
	stopped (None when none was). `request` is this run's own: a chained run's carries its chain's root and depth."""
	outcome = "Success" if log.status == "Succeeded" else "Failure"
	rows = [row for row in task.get("chained_tasks") or [] if row.on_outcome in (outcome, "Any") and row.next_task]
	if not rows:
		return [], None
	root, depth = chain_lineage(log, request)
	started = chained_runs_started(root)
	allowed = rr.chained_runs_allowed(depth, started, len(rows))
	names = []
	for row in rows[:allowed]:
		doc, _inserted = insert(
			rr.chain_request_name(log.name, row.next_task),
			task=row.next_task,
			origin=rr.CHAIN,
			attempt=1,
			run_at=utc_now() + timedelta(seconds=max(0, cint(row.delay_secs))),
			parent_log=log.name,
			chain_root=root,
			chain_depth=depth + 1,
			status=rr.PENDING,
			note=_("Chained after {0} ({1}) of {2}.").format(log.name, log.status, task.name),
		)
		names.append(doc.name)
	if allowed == len(rows):
		return names, None
	stopped = ", ".join(row.next_task for row in rows[allowed:])
	if depth >= rr.MAX_CHAIN_DEPTH:
		note = _(
			"Chained tasks {0} not started: this run is {1} links from the chain's first run {2}, the most a chain "
			"may have ({3})."
		).format(stopped, depth, root, rr.MAX_CHAIN_DEPTH)
	else:
		note = _(
			"Chained tasks {0} not started: the chain of the run {1} has started {2} runs, the most one run's chain "
			"may start ({3})."
		).format(stopped, root, started + allowed, rr.MAX_CHAIN_RUNS)
	frappe.logger("btu").warning(
		f"site={frappe.local.site} log={log.name} chain_root={root} chained tasks not started: {stopped}"
	)
	return names, note


def chain_lineage(log, request) -> tuple[str, int]:
	"""(the chain's root run's Log, this run's depth from it): a chained run's (or its retry's) from its request, else
	this run starts a chain of its own at depth 0. Carried in the requests, so the bounds hold whatever the saved links
	say now: a cycle written past the save's check, or links edited while the chain runs."""
	if request is not None and request.get("chain_root"):
		return request.chain_root, cint(request.chain_depth)
	return log.name, 0


def chained_runs_started(root: str) -> int:
	"""How many chained runs the chain of `root` (a Log) has requested. Its root Log is locked first, so chained runs of
	one chain finishing at once count one after the other; the count is a locking read, so it sees what the one before
	committed (a plain read would see this transaction's older snapshot)."""
	frappe.db.sql("select name from `tabBTU Task Log` where name = %s for update", root)
	return len(
		frappe.db.sql(
			f"select name from `tab{rr.DOCTYPE}` where chain_root = %s and origin = %s for update", (root, rr.CHAIN)
		)
	)


def chain_cycle(task_name: str, edges: dict[str, set[str]]) -> list[str] | None:
	"""A path of chained tasks from `task_name` back to itself in `edges` (task -> its next tasks), or None."""
	stack = [(task_name, [task_name])]
	seen = set()
	while stack:
		node, path = stack.pop()
		for child in sorted(edges.get(node, ())):
			if child == task_name:
				return [*path, child]
			if child not in seen:
				seen.add(child)
				stack.append((child, [*path, child]))
	return None


def lock_chains() -> None:
	"""Until this transaction ends, hold the lock every save adding chain links takes before it looks for a cycle.

	A cycle spans Tasks: saves of A -> B and of B -> A each lock their own row, and without a common lock both would
	find no cycle and both commit. The lock is a row every site with BTU has, BTU Chained Task's DocType row, written
	with its own value: the lock ends with the transaction (a named lock, GET_LOCK, would outlive it on MariaDB), and
	on Postgres, whose REPEATABLE READ snapshot would hide the first save's links from the second, the second's write
	fails as a concurrent update instead of passing. Nothing else writes that row but a migrate."""
	frappe.db.sql("update `tabDocType` set name = name where name = %s", "BTU Chained Task")


def chain_edges() -> dict[str, set[str]]:
	"""Every saved Task's chained tasks: task -> the tasks it starts. A locking read: under REPEATABLE READ a plain one
	would read this transaction's snapshot, older than the chain lock and the links committed before it was taken."""
	edges: dict[str, set[str]] = {}
	rows = frappe.db.sql(
		"select parent, next_task from `tabBTU Chained Task` where parenttype = %s for update", "BTU Task"
	)
	for parent, next_task in rows:
		edges.setdefault(parent, set()).add(next_task)
	return edges


# -- backfill ----------------------------------------------------------------------


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


# -- a request's run ------------------------------------------------------------------


def load(name: str):
	"""The request as a row (fields as attributes), or None when it is gone.
	A row, not a Document: this is read before every request's run, and a Document costs a forked work-horse its
	import and its DocType's Meta."""
	rows = frappe.db.sql(f"select * from `tab{rr.DOCTYPE}` where name = %s", name, as_dict=True)
	if not rows:
		return None
	row = rows[0]
	for field, value in store.read(rr.DOCTYPE, [name]).get(name, {}).items():
		row[field] = row.get(field) or value  # its column's, when SQL wrote one (shared.sealed.value_sql)
	return row


def mark_done(request, log_name: str | None, note: str | None = None, *, tell_scheduler: bool = True) -> None:
	"""In the caller's transaction: the request ran (or its slot had run), as Log `log_name`; the scheduler drops it
	after commit. One UPDATE (frappe.db.set_value would load Frappe's query engine before the run). A run marking its
	own request passes `tell_scheduler=False` and `announce`s after its call: the RPC waits for the scheduler's reply,
	and the Done request's state fires nothing meanwhile (its one moment is past; a full reconcile drops it too)."""
	values = {
		"status": rr.DONE,
		"log": log_name,
		"modified": to_system_naive(utc_now()),
		"modified_by": frappe.session.user,
	}
	if note:
		values["note"] = "\n".join(filter(None, [request.note, note]))
	assignments = ", ".join(f"`{field}` = %s" for field in values)
	frappe.db.sql(f"update `tab{rr.DOCTYPE}` set {assignments} where name = %s", [*values.values(), request.name])
	if tell_scheduler:
		announce(request.name)


def check_may_cancel(request) -> None:
	"""Raise frappe.PermissionError unless the session user may withdraw `request`: an enqueued run only the user who
	enqueued it, a System Manager or Administrator (a BTU Manager withdraws retries and backfills, not another user's or
	another app's jobs); any other request whoever reached this (api.cancel_run_request checks BTU's roles first)."""
	user = frappe.session.user
	if (
		request.origin != rr.ENQUEUE
		or user in ("Administrator", request.enqueued_by)
		or "System Manager" in frappe.get_roles(user)
	):
		return
	frappe.throw(
		_("Run request {0}: enqueued by {1}; only that user or a System Manager may cancel it").format(
			request.name, request.enqueued_by
		),
		frappe.PermissionError,
		title=_("Not permitted"),
	)


def cancel(request) -> None:
	"""Withdraw a request that has not run; a backfill's waiting ones after it are withdrawn too."""
	check_may_cancel(request)
	if request.status not in (rr.PENDING, rr.WAITING):
		frappe.throw(
			_("Run request {0} is {1}; only a Pending or Waiting one can be cancelled").format(
				request.name, request.status
			)
		)
	chain = [request.name]
	while True:
		following = frappe.db.get_value(rr.DOCTYPE, {"previous_request": chain[-1], "status": rr.WAITING}, "name")
		if not following:
			break
		chain.append(following)
	for name in chain:
		frappe.db.set_value(rr.DOCTYPE, name, "status", rr.CANCELLED)
	announce(request.name)
