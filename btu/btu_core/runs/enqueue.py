"""`btu.enqueue_at`, `btu.enqueue_in` and `btu.cancel`: run a declared function at a moment, once, from Frappe code.

A call inserts a `BTU Run Request` (origin Enqueue) in the caller's
transaction: the job exists exactly when the caller's work commits, and the
site database stays its source of truth through failovers and Redis losing
its data. After commit the scheduler is told (as for any request); it fires
the request as a Once state at its millisecond on the request's queue, and
the job runs `run` here, which claims the request, marks it Done and calls
the function as the user who enqueued it (as frappe.enqueue's job runs as
its caller), or as the user a System Manager named. A second delivery finds it Done and runs nothing: at most once
per request, and exactly once while a worker survives its run. The outcome
goes into the request's Note; with `task_log=True` the run also writes a
BTU Task Log (no Task; its Function is the method) with its stdout, stderr,
logging, return value or traceback, as a Task's run does.

The function must be declared runnable (`btu.shared.declared`), as a Task's
must: code that can call enqueue_at can call the function anyway, but a
request row names its function, and no row may make a worker run one that
no installed app declared.
"""

from __future__ import annotations

import json
import math
import socket
from datetime import datetime, timedelta

import frappe
from frappe import _
from rq import get_current_job

from btu.btu_core.instants import to_system_naive, to_utc, utc_now
from btu.btu_core.messages import input_error
from btu.btu_core.runs import retries, run_requests
from btu.btu_core.runs.capture import Call, call_captured, where_it_runs
from btu.btu_core.runs.run_rows import END_FIELDS, insert_log, locked_log, save_log
from btu.btu_core.runs.slot_claim import SlotLock, lock_key
from btu.btu_core.runs.task_inputs import TaskInputError, check_arguments_fit, check_queue, resolve_function
from btu.shared import run_requests as rr
from btu.shared.instants import parse_utc_iso, slot_text
from btu.shared.messages import InputError
from btu.shared.task_args import MAX_ARGUMENTS_CHARS

# A moment at most this far in the past runs at once (the caller's clock, a slow request); further back is refused.
GRACE_SECS = 60
# The furthest ahead a moment may be.
MAX_AHEAD_DAYS = 3660
# A job key ("<app>:<job_id>") fits the request's Job ID field.
MAX_JOB_KEY_CHARS = 140


class EnqueueError(frappe.ValidationError):
	"""An enqueue_at call refused; the message names the input and how to fix it."""


def enqueue_at(
	method,
	at,
	*,
	queue: str = "default",
	timeout: int | None = None,
	job_id: str | None = None,
	task_log: bool = False,
	as_user: str | None = None,
	**kwargs,
) -> str:
	"""Run `method(**kwargs)` at `at` on `queue`, once, as the calling user; the handle (the request's name) for
	`cancel`.

	`method`: a function or its dotted path, declared runnable. `at`: an aware datetime, ISO 8601 text with an
	offset, or a naive one in the site's time zone (as Frappe stores Datetimes). `timeout`: seconds (None: the
	queue's). `job_id`: a key of your own, scoped to the function's app: while its request is pending, the same call
	with it adds nothing and returns the same handle (that request keeps its moment and user), another call with it
	raises; once that request ran or was cancelled, it asks for a new run. `task_log`: the run writes a BTU Task Log
	with its output and outcome (off: only the request's Note says it). `as_user`: run as this user instead of the
	caller (only a System Manager, or code running as Administrator, may).
	"""
	path = method_path(method)
	moment = instant(at)
	now = utc_now()
	check_moment(moment, now)
	try:
		check_queue(queue, "queue")
		function = resolve_function(path, "method")
		check_arguments_fit(function, path, kwargs, complete=True)
	except TaskInputError as exc:
		raise EnqueueError(str(exc)) from None
	text = kwargs_json(kwargs)
	if timeout is not None and (isinstance(timeout, bool) or not isinstance(timeout, int) or timeout < 1):
		raise EnqueueError(_("timeout {0!r}: give whole seconds, 1 or more, or None for the queue's").format(timeout))
	if not isinstance(task_log, bool):
		raise EnqueueError(_("task_log {0!r}: give True or False").format(task_log))
	user = run_as(as_user)
	values = {
		"run_at": max(moment, now),
		"exact": True,
		"status": rr.PENDING,
		"origin": rr.ENQUEUE,
		"method": path,
		"kwargs": text,
		"queue": queue,
		"timeout": timeout or 0,
		"attempt": 1,
		"enqueued_by": frappe.session.user,
		"run_as": user,
		"task_log": int(task_log),
	}
	if job_id is None:
		doc, _inserted = run_requests.insert(rr.enqueue_request_name(), **values)
		return doc.name
	return request_of_job(job_key(path, job_id), values)


def check_moment(moment: datetime, now: datetime) -> None:
	"""Refuse a moment more than GRACE_SECS in the past or more than MAX_AHEAD_DAYS ahead."""
	if moment < now - timedelta(seconds=GRACE_SECS):
		raise EnqueueError(
			_(
				"at {0}: is {1} s in the past, beyond the {2} s grace; give a future moment (or call the function now)"
			).format(slot_text(moment), int((now - moment).total_seconds()), GRACE_SECS)
		)
	if moment > now + timedelta(days=MAX_AHEAD_DAYS):
		raise EnqueueError(
			_("at {0}: is more than {1} days ahead; use a BTU Task Schedule").format(slot_text(moment), MAX_AHEAD_DAYS)
		)


def job_key(path: str, job_id) -> str:
	"""`job_id` scoped to the app of the function it runs, as the request stores it."""
	if not isinstance(job_id, str) or not job_id.strip():
		raise EnqueueError(_("job_id {0!r}: give non-empty text, or leave it out").format(job_id))
	key = rr.job_key(path, job_id)
	if len(key) > MAX_JOB_KEY_CHARS:
		raise EnqueueError(
			_("job_id {0!r}: with its app's prefix it is {1} characters, more than {2}; give a shorter one").format(
				job_id, len(key), MAX_JOB_KEY_CHARS
			)
		)
	return key


def request_of_job(key: str, values: dict) -> str:
	"""The pending request of job key `key` if there is one and it makes the same call, else a new one: its name.

	Only a pending request dedupes (as rq and Frappe dedupe only a queued job): once it ran or was cancelled, the key
	asks for its next generation, a request of its own. Two callers asking at once insert the same generation's name,
	so the second finds the first's row; a stale read of the newest generation only costs a step of the loop."""
	rows = frappe.db.sql(f"select max(job_generation) from `tab{rr.DOCTYPE}` where job_id = %s", key)
	generation = max(1, rows[0][0] or 1)
	while True:
		doc, inserted = run_requests.insert(
			rr.enqueue_request_name(key, generation), job_id=key, job_generation=generation, **values
		)
		if inserted:
			return doc.name
		if doc.status == rr.PENDING and not past_catch_up(doc):
			if (doc.method, doc.kwargs) != (values["method"], values["kwargs"]):
				raise EnqueueError(
					_(
						"job_id {0!r}: request {1} is pending with it for {2}({3}); this call asks {4}({5}). Give "
						"this call a job_id of its own, or cancel {1} first to replace it"
					).format(
						key.partition(":")[2],
						doc.name,
						doc.method,
						shorten(doc.kwargs),
						values["method"],
						shorten(values["kwargs"]),
					)
				)
			return doc.name
		if doc.status == rr.PENDING:
			withdraw(
				doc,
				_(
					"Not run: its moment passed more than {0} s ago without a fire (no scheduler ran); its job_id was "
					"asked again."
				).format(rr.CATCH_UP_WINDOW_SECS),
			)
		generation += 1


def past_catch_up(request) -> bool:
	"""Whether a pending request's moment is past the window within which the scheduler still fires it: it never
	will."""
	return parse_utc_iso(request.run_at_utc, "run_at_utc") + timedelta(seconds=rr.CATCH_UP_WINDOW_SECS) < utc_now()


def shorten(text: str | None, limit: int = 200) -> str:
	text = text or ""
	return text if len(text) <= limit else f"{text[:limit]}..."


def enqueue_in(seconds: float, method, **options) -> str:
	"""`enqueue_at` `seconds` from now."""
	if isinstance(seconds, bool) or not isinstance(seconds, (int, float)) or not math.isfinite(seconds) or seconds < 0:
		raise EnqueueError(_("seconds {0!r}: give a number of seconds, 0 or more").format(seconds))
	return enqueue_at(method, utc_now() + timedelta(seconds=seconds), **options)


def cancel(handle: str) -> bool:
	"""Withdraw an enqueued run that has not started: True if this call withdrew it, False if it ran or was
	withdrawn."""
	# get_value with no name reads the first row: a handle must be a name.
	request = (
		frappe.db.get_value(
			rr.DOCTYPE, handle, ["name", "status", "origin", "enqueued_by"], as_dict=True, for_update=True
		)
		if handle and isinstance(handle, str)
		else None
	)
	if request is None or request.origin != rr.ENQUEUE:
		raise EnqueueError(_("handle {0!r}: no enqueued run has it; pass what enqueue_at returned").format(handle))
	run_requests.check_may_cancel(request)
	if request.status != rr.PENDING:
		return False
	run_requests.cancel(frappe.get_doc(rr.DOCTYPE, handle))
	return True


def run_as(as_user) -> str:
	"""The user the run switches to, as frappe.enqueue's job does: the caller, or `as_user` when the caller may choose.

	The default keeps what code moved from frappe.enqueue had: a portal handler's job runs with the portal user's
	rights, not Administrator's. Naming another user is for a System Manager (or code running as Administrator: a
	migrate, a scheduled job), who may act as anyone anyway."""
	caller = frappe.session.user
	if as_user is None or as_user == caller:
		return caller
	if caller != "Administrator" and "System Manager" not in frappe.get_roles(caller):
		frappe.throw(
			_(
				"as_user {0!r}: only a System Manager may run an enqueued function as another user; leave as_user out "
				"to run it as {1}"
			).format(as_user, caller),
			frappe.PermissionError,
			title=_("Not permitted"),
		)
	enabled = frappe.db.get_value("User", as_user, "enabled") if isinstance(as_user, str) and as_user else None
	if not enabled:
		raise EnqueueError(
			_(
				"as_user {0!r}: no enabled user has this name; give a User's name (its e-mail) or leave as_user out"
			).format(as_user)
		)
	return as_user


def method_path(method) -> str:
	"""The dotted path of `method` (a function, or the path itself)."""
	if isinstance(method, str):
		return method.strip()
	if callable(method) and getattr(method, "__module__", None) and getattr(method, "__qualname__", None):
		return f"{method.__module__}.{method.__qualname__}"
	raise EnqueueError(_("method {0!r}: give a module-level function or its dotted path").format(method))


def instant(at) -> datetime:
	"""`at` as an aware UTC instant, rounded up to the millisecond (a run never starts before its moment)."""
	try:
		moment = to_utc(at, "at")
	except InputError as exc:
		raise EnqueueError(input_error(exc)) from None
	except TypeError:
		raise EnqueueError(
			_("at {0!r}: give a datetime or ISO 8601 text, e.g. 2026-11-24T02:00:00Z").format(at)
		) from None
	extra = moment.microsecond % 1000
	return moment + timedelta(microseconds=1000 - extra) if extra else moment


def kwargs_json(kwargs: dict) -> str:
	"""The keyword arguments as the request stores them; a value JSON cannot carry is named."""
	for key, value in kwargs.items():
		try:
			json.dumps(value, allow_nan=False)
		except (TypeError, ValueError) as exc:
			raise EnqueueError(
				_(
					"argument {0}: {1} cannot be stored as JSON ({2}); pass plain values (a date as ISO text, a "
					"document by its name)"
				).format(key, type(value).__name__, exc)
			) from None
	text = json.dumps(kwargs, sort_keys=True)
	if len(text) > MAX_ARGUMENTS_CHARS:
		raise EnqueueError(
			_(
				"arguments: {0} characters of JSON, more than {1}; store the data in a document and pass its name"
			).format(len(text), MAX_ARGUMENTS_CHARS)
		)
	return text


def run(request, enqueued_at=None, fire_lag_ms=None):
	"""The job of an Enqueue request: claim it, mark it Done (so no other delivery runs it), call the function."""
	logger = frappe.logger("btu")
	where = f"site={frappe.local.site} request={request.name} method={request.method}"
	with SlotLock(
		frappe.db.sql, frappe.conf.db_type or "mariadb", lock_key(frappe.conf.db_name, "run request", request.name)
	):
		frappe.db.commit()  # a new snapshot: a delivery we waited for may have marked it Done
		# Plain SQL, as every read before the call: frappe.db.get_value would load Frappe's query engine first.
		rows = frappe.db.sql(f"select status from `tab{rr.DOCTYPE}` where name = %s", request.name)
		status = rows[0][0] if rows else None
		if status != rr.PENDING:
			logger.info(f"{where} {str(status).lower()}; not run")
			return None
		user = request.run_as or request.enqueued_by  # enqueued_by: a request written before run_as was
		if not enabled_user(user):
			withdraw(request, _("Not run: it runs as {0}, who is no longer an enabled user.").format(user or "?"))
			frappe.db.commit()
			logger.info(f"{where} user={user} not enabled; not run")
			return None
		started = utc_now()
		note = started_note(request, started, fire_lag_ms)
		log = start_log(request, started, enqueued_at, fire_lag_ms) if request.task_log else None
		run_requests.mark_done(request, log, note, tell_scheduler=False)  # told after the call, by `record`
		frappe.db.commit()
	logger.info(f"{where} started fire_lag_ms={fire_lag_ms}" + (f" log={log}" if log else ""))
	call, called_at = call_as(user, request, capture=log is not None)
	if call.exc is None:
		outcome = _("Succeeded in {0:.3f} s.").format(call.elapsed)
	else:
		# The exception's kind only: its text is the Log's sealed result_message, and the note is a column any
		# user's get_count reads on v15 (docs/SECURITY.md).
		outcome = _("Failed after {0:.3f} s: {1}").format(call.elapsed, type(call.exc).__name__)
	start_lag_ms = (
		round((called_at - parse_utc_iso(request.run_at_utc, "run_at_utc")).total_seconds() * 1000, 3)
		if called_at
		else None
	)
	record(request.name, note, outcome, log, call, start_lag_ms)
	logger.info(f"{where} {call.status.lower()}" + (f": {type(call.exc).__name__}" if call.exc else ""))
	if call.exc is not None:
		raise retries.recorded(call.exc, log or request.name)
	return request.name


def call_as(user: str, request, capture: bool) -> tuple[Call, datetime | None]:
	"""Call the request's function as `user`, committing its work if it returned: the call, and when the function was
	called (None if resolving it or its arguments failed first)."""
	called = {}

	def function_call():
		function, kwargs = resolve_function(request.method), json.loads(request.kwargs or "{}")
		called["at"] = utc_now()
		return function(**kwargs)

	# The job itself runs as Administrator (the scheduler's jobs are one per request, not per user): it claimed the
	# request and writes its outcome; the function, and the commit of its work, run as the request's user.
	runner = frappe.session.user
	frappe.set_user(user)
	try:
		# No time limit of BTU's own: the job runs under RQ, which enforces the request's timeout (the queue's if none).
		call = call_captured(function_call, capture=capture)
		if call.exc is None:
			frappe.db.commit()
	finally:
		frappe.set_user(runner)
	return call, called.get("at")


def enabled_user(user: str | None) -> bool:
	"""Whether `user` may still run what it enqueued: one that was disabled or deleted since runs nothing."""
	# Plain SQL, as every read before the call (frappe.db.get_value would load Frappe's query engine).
	return bool(user) and bool(frappe.db.sql("select 1 from `tabUser` where name = %s and enabled = 1", user))


def withdraw(request, note: str) -> None:
	"""Mark the request Cancelled with `note`, in the caller's transaction; the scheduler drops it after commit."""
	frappe.db.sql(
		f"update `tab{rr.DOCTYPE}` set status = %s, note = %s where name = %s",
		(rr.CANCELLED, "\n".join(filter(None, [request.note, note])), request.name),
	)
	run_requests.announce(request.name)


def started_note(request, started: datetime, fire_lag_ms) -> str:
	"""The Note's first line: when and where the run started, and its two lags, each named, for they differ by the
	worker's pick-up and the job's start-up: fire lag (the moment to its job on the queue: the scheduler's) and start
	lag (the moment to this start in the worker: what the function waited)."""
	start_lag_ms = (started - parse_utc_iso(request.run_at_utc, "run_at_utc")).total_seconds() * 1000
	return _(
		"Started {0} on {1}: fire lag {2} ms (its moment to its job on the queue), start lag {3} ms (its moment to "
		"this start)."
	).format(
		slot_text(started),
		socket.gethostname(),
		fire_lag_ms if fire_lag_ms is not None else "?",
		round(start_lag_ms, 3),
	)


def start_log(request, started: datetime, enqueued_at: datetime | None, fire_lag_ms) -> str:
	"""Insert the run's Task Log as Started (in the transaction that marks the request Done): its name."""
	return insert_log(
		{
			"method": request.method,
			"task_desc_short": request.method,
			"slot": request.run_at,
			"slot_utc": request.run_at_utc,
			"status": "Started",
			"date_time_enqueued": to_system_naive(enqueued_at) if enqueued_at else None,
			"date_time_started": to_system_naive(started),
			"fire_lag_ms": fire_lag_ms,
			"origin": rr.ENQUEUE,
			"attempt": 1,
			"run_request": request.name,
			**where_it_runs(get_current_job()),
		}
	)


def record(name: str, note: str, outcome: str, log: str | None, call: Call, start_lag_ms: float | None = None) -> None:
	"""The outcome in the request's Note and, when it has one, the run's Task Log (with its start lag: the moment to the
	function's call), in one transaction."""
	frappe.db.sql(f"update `tab{rr.DOCTYPE}` set note = %s where name = %s", (f"{note}\n{outcome}"[:10_000], name))
	run_requests.announce(name)  # marked Done before the call; the scheduler drops its state once this commits
	if log:
		# Read locked, as a Task's run ends its Log: the lost-run sweep waits for this end.
		row = locked_log(log)
		row.update(
			{
				**call.log_values(),
				"date_time_ended": to_system_naive(utc_now()),
				"logging_output": call.log_output.getvalue(),
				"start_lag_ms": start_lag_ms,
			}
		)
		save_log(row, END_FIELDS)
	frappe.db.commit()
