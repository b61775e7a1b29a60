"""One run of a BTU Task and its one BTU Task Log: "Run via Worker", "Run on Web Server" (`run_in_this_process`), a
schedule's slot and a run request's Task run (`btu.btu_core.task_runner` hands them here).

A run inserts its Log as "Started" and commits, runs the function with stdout, stderr and logging captured
(`capture`), then updates the same Log. What comes before the call reads and writes rows (`run_rows`): a forked
work-horse pays for every module and round trip on every run. What can wait (the late-start alert, the Log's end,
retries, chains, counts) comes after the call, with Documents. A run delivered again (Redis lost its release or its
dequeue in a failover) finds that Log and does not run: the look and the insert happen under a database lock per
(schedule, slot) (`slot_claim`). On failure it rolls the function's own writes back first, writes the Log
in its own transaction, commits it and re-raises so RQ marks the job failed. A finished run's outcome is added to the
site's counts for Prometheus and to the job's monitor entry (`btu.btu_core.insights.metrics`).
"""

from __future__ import annotations

import sys
from contextlib import nullcontext
from datetime import timedelta
from enum import Enum

import frappe
from rq import get_current_job

from btu.btu_core.alerts import run_events
from btu.btu_core.alerts.notifications import notify
from btu.btu_core.insights.metrics import add_to_monitor, record_outcome
from btu.btu_core.instants import system_now, to_system_naive, utc_now
from btu.btu_core.runs import backfills, chains, retries, run_requests
from btu.btu_core.runs.capture import Call, call_captured, where_it_runs
from btu.btu_core.runs.run_rows import (
	END_FIELDS,
	document_rows,
	insert_log,
	locked_log,
	save_log,
	task_and_schedule,
	update_log,
)
from btu.btu_core.runs.slot_claim import LOG_FOR_SLOT_SQL, SlotLock, attempt_slot, lock_key
from btu.btu_core.runs.task_inputs import merge_arguments, resolve_function
from btu.btu_core.runs.time_limit import LOST_RUN_MARGIN_SECS, max_duration
from btu.shared.instants import format_utc_iso, parse_utc_iso
from btu.shared.run_requests import CHAIN, DONE, chain_request_name, slot_request_name

# The Log an earlier delivery of a request's run, or of a "Run via Worker" job, wrote.
LOG_OF_REQUEST_SQL = "select name from `tabBTU Task Log` where run_request = %s order by creation desc limit 1"
LOG_OF_JOB_SQL = "select name from `tabBTU Task Log` where rq_job_id = %s order by creation desc limit 1"
# A run of the schedule still Started and not yet past its time limit (overlap_policy skip).
STARTED_LOG_OF_SCHEDULE_SQL = (
	"select name from `tabBTU Task Log` where schedule = %s and status = 'Started' and date_time_started > %s limit 1"
)


class Delivery(Enum):
	"""What makes two deliveries of a run one run: the second finds the first's Log by it, under its lock."""

	SLOT = "slot"  # a schedule's slot attempt
	REQUEST = "run request"  # a retry, backfill, chain link or enqueue_at
	RQ_JOB = "rq job"  # a "Run via Worker": its RQ job
	IN_PROCESS = "in process"  # "Run on Web Server": nothing delivers it twice


def run_in_this_process(task, schedule=None):
	"""Run now in this process (the web server's "Run on Web Server"); returns the Log, never raises for the task."""
	return TaskRun(task, schedule=schedule, enqueued_at=utc_now()).execute(reraise=False)


class TaskRun:
	"""One run of a Task, optionally for a Schedule's slot."""

	def __init__(
		self, task, *, schedule=None, slot=None, enqueued_at=None, fire_lag_ms=None, request=None, moment=None
	):
		self.task_name = task
		self.schedule_name = schedule or None
		self.slot = slot
		# A run request's run (retry, backfill, chain): its attempt and links come from the request.
		self.request = request
		self.attempt = int(request.attempt or 1) if request is not None else 1
		self.enqueued_at = enqueued_at
		self.fire_lag_ms = fire_lag_ms
		# What the start lag is measured from, as the fire lag is: the slot's fire time (slot + jitter), a request's
		# run_at; a run with neither (Run Now) has none.
		self.moment = moment or slot
		self.start_lag_s = None
		self.job = get_current_job()
		self.logger = frappe.logger("btu")
		if self.schedule_name and self.slot:
			self.delivery = Delivery.SLOT
		elif request is not None:
			self.delivery = Delivery.REQUEST
		elif self.job:
			self.delivery = Delivery.RQ_JOB
		else:
			self.delivery = Delivery.IN_PROCESS

	# -- the run -----------------------------------------------------------------

	def execute(self, *, reraise: bool = True):
		with self.claim():
			# A new snapshot: under REPEATABLE READ a Log committed by the delivery we waited for would stay hidden.
			frappe.db.commit()
			earlier = self.earlier_log()
			if earlier is not None:
				# Redis can deliver a run again (a failover lost the release or the dequeue): the database says it was
				# done.
				self.event(f"log={earlier.name} ({earlier.status}) is this run's already; not run again")
				if self.request is not None and self.request.status != DONE:
					# A backfilled slot that had run meanwhile, or a request whose Done was lost with its scheduler's
					# state.
					run_requests.mark_done(
						self.request, earlier.name, frappe._("Its run was {0} already.").format(earlier.name)
					)
					backfills.release_next(self.request)
					frappe.db.commit()
				return earlier
			rows = task_and_schedule(self.task_name, self.schedule_name)
			if self.schedule_name and rows.schedule is None:
				return self.write_skipped(
					rows, frappe._("schedule {0} no longer exists; the run was skipped").format(self.schedule_name)
				)
			if rows.overlap_policy == "skip" and self.other_run_in_progress(rows):
				return self.write_skipped(
					rows, frappe._("the previous run of this schedule is still running (overlap_policy skip)")
				)
			log_name, notes = self.write_started(rows)
		# The arguments are merged and the function resolved inside the call: their errors are the run's Failed Log.
		# The function is checked again on every run: a Task saved before its app stopped declaring it must not run it.
		call = call_captured(lambda: self.call(rows), 0 if self.job else max_duration(rows))
		log = self.write_finished(log_name, rows, call, notes)
		if call.exc is not None and reraise:
			raise retries.recorded(call.exc, log.name)
		return log

	def call(self, rows):
		"""The Task's function with its arguments; the start lag is taken as it is called."""
		function = resolve_function(rows.function_string)
		arguments = merge_arguments(rows.arguments, rows.argument_overrides)
		if self.moment is not None:
			self.start_lag_s = (utc_now() - self.moment).total_seconds()
		return function(**arguments)

	# -- the log ------------------------------------------------------------------

	def claim(self):
		"""The lock under which this run looks for its Log and writes it (`slot_claim`): one per (schedule, slot),
		or per RQ job for a "Run via Worker"; none for a run in this process, which nothing delivers twice."""
		if self.delivery == Delivery.IN_PROCESS:
			return nullcontext()
		if self.delivery == Delivery.SLOT:
			scope, name = self.schedule_name, attempt_slot(format_utc_iso(self.slot), self.attempt)
		else:
			scope, name = self.delivery.value, self.request.name if self.request is not None else self.job.id
		return SlotLock(frappe.db.sql, frappe.conf.db_type or "mariadb", lock_key(frappe.conf.db_name, scope, name))

	def earlier_log(self):
		"""The Log of an earlier delivery of this same run: its slot attempt's, its request's, or its RQ job's."""
		# Plain SQL: frappe.db.get_value with filters would load Frappe's query engine before every run.
		if self.delivery == Delivery.SLOT:
			rows = frappe.db.sql(LOG_FOR_SLOT_SQL, (self.schedule_name, format_utc_iso(self.slot), self.attempt))
		elif self.delivery == Delivery.REQUEST:
			rows = frappe.db.sql(LOG_OF_REQUEST_SQL, self.request.name)
		elif self.delivery == Delivery.RQ_JOB:
			rows = frappe.db.sql(LOG_OF_JOB_SQL, self.job.id)
		else:
			return None
		return frappe.get_doc("BTU Task Log", rows[0][0]) if rows else None

	def other_run_in_progress(self, task) -> bool:
		cutoff = system_now() - timedelta(seconds=max_duration(task) + LOST_RUN_MARGIN_SECS)
		return bool(frappe.db.sql(STARTED_LOG_OF_SCHEDULE_SQL, (self.schedule_name, cutoff)))

	def write_started(self, rows) -> tuple[str, list[str]]:
		"""The Started Log, the request marked Done and the Task's last_runtime in one transaction: the Log's name, and
		the start mail's note when it could not be queued."""
		now = system_now()
		values = {**self.log_values(rows, "Started", self.schedule_name), "date_time_started": now}
		name = insert_log(values)
		if self.request is not None:
			run_requests.mark_done(self.request, name, tell_scheduler=False)  # told with the Log's end
		frappe.db.sql("update `tabBTU Task` set last_runtime = %s where name = %s", (now, rows.name))
		notes = self.mail_on_start(name) if rows.mail_on_start else []
		frappe.db.commit()
		self.event(f"log={name} started worker={values['worker']} job={values['rq_job_id'] or '-'}")
		return name, notes

	def log_values(self, rows, status: str, schedule: str | None) -> dict:
		"""What every Log of this run holds from its start, however it ends: the Task, the slot, when it was enqueued,
		where it runs, its lineage."""
		return {
			"task": rows.name,
			"task_desc_short": rows.desc_short,
			"schedule": schedule,
			"slot": to_system_naive(self.slot) if self.slot else None,
			"slot_utc": format_utc_iso(self.slot) if self.slot else None,
			"status": status,
			"task_component": "Main",
			"date_time_enqueued": to_system_naive(self.enqueued_at) if self.enqueued_at else None,
			"fire_lag_ms": self.fire_lag_ms,
			**where_it_runs(self.job),
			**self.lineage(),
		}

	def mail_on_start(self, log_name: str) -> list[str]:
		"""A recipient asked for mail when a run starts: sent with the Documents it needs (the note when it could not
		be)."""
		task = frappe.get_doc("BTU Task", self.task_name)
		schedule = frappe.get_doc("BTU Task Schedule", self.schedule_name) if self.schedule_name else None
		note = notify(frappe.get_doc("BTU Task Log", log_name), task, schedule)
		return [note] if note else []

	@classmethod
	def of_log(cls, log, schedule) -> TaskRun:
		"""The run a Log records, for its sequels after the lost-run sweep ended it."""
		request = (
			frappe.get_doc(run_requests.rr.DOCTYPE, log.run_request)
			if log.get("run_request") and frappe.db.exists(run_requests.rr.DOCTYPE, log.run_request)
			else None
		)
		slot = parse_utc_iso(log.slot_utc, "slot_utc") if log.get("slot_utc") else None
		return cls(
			log.task, schedule=schedule.name if schedule is not None and slot else None, slot=slot, request=request
		)

	def lineage(self) -> dict:
		"""A Log's attempt and links: its request's origin, the first attempt, the run that started it."""
		request = self.request
		if request is None:
			return {"attempt": 1}
		return {
			"attempt": self.attempt,
			"origin": request.origin,
			"run_request": request.name,
			"first_attempt_log": request.first_log,
			"parent_log": request.parent_log,
		}

	def retry_key(self, attempt: int) -> str | None:
		"""The request name of this run's `attempt`: per (schedule, slot, attempt), or per (chain link, attempt); None
		for a run with neither (Run Now)."""
		if self.delivery == Delivery.SLOT:
			return slot_request_name(self.schedule_name, self.slot, attempt)
		if self.delivery == Delivery.REQUEST and not self.request.slot_utc:
			# A chained run (or its retry): its attempts hang off the Log that started the chain link.
			return chain_request_name(self.chain_parent(), self.task_name, attempt)
		return None

	def chain_parent(self) -> str:
		"""The Log whose outcome started this chained run (a retry's request names the attempt before instead)."""
		if self.request.origin == CHAIN:
			return self.request.parent_log
		return frappe.db.get_value("BTU Task Log", self.request.first_log, "parent_log") or self.request.parent_log

	def after(self, log, task, schedule, exc) -> None:
		"""A finished run's sequels, in their own transaction: its retry or its chain, the alerts, a backfill's next
		slot. Never raises: the run's Log is committed already."""
		final, note, requested = True, None, []
		try:
			if log.status in ("Failed", "Timed Out"):
				note, retried = retries.schedule_retry(self, log, task, schedule, exc)
				final = not retried
			if final:
				chained, chain_note = chains.start_chained(log, task, self.request)
				requested += chained
				note = "\n".join(filter(None, [note, chain_note])) or None
			if self.request is not None:
				requested.append(backfills.release_next(self.request))
			if note:
				log.retried = 0 if final else 1
				log.logging_output = "\n".join(filter(None, [log.logging_output, note]))
				update_log(log.name, {"retried": log.retried, "logging_output": log.logging_output})
			if note or any(requested):
				frappe.db.commit()
		except Exception:
			frappe.db.rollback()
			frappe.logger("btu").error(
				f"site={frappe.local.site} log={log.name} retry or chain not requested", exc_info=True
			)
			final = True
		run_events.run_finished(log, task, schedule, final=final)

	def write_finished(self, name, rows, call: Call, notes):
		# Read locked (its latest version, whatever the function read before) until the commit below, so the
		# lost-run sweep waits for this end. A Log it timed out already (its worker was alive after all)
		# still gets the true end, but its outcome is counted once.
		log = locked_log(name)
		was = log.status
		task, schedule = finished_documents(rows, self.task_name, self.schedule_name)
		log.update({**call.log_values(), "date_time_ended": system_now(), "start_lag_ms": self.start_lag_ms()})
		if task is not None:
			log.task_desc_short = task.desc_short
		mail_note = notify(log, task, schedule) if task is not None else None
		log.logging_output = "\n".join([call.log_output.getvalue(), *notes, *([mail_note] if mail_note else [])]).strip(
			"\n"
		)
		save_log(log, (*END_FIELDS, "task_desc_short"))
		if self.request is not None:
			run_requests.announce(self.request.name)  # marked Done before the call, told now
		frappe.db.commit()
		self.event(
			f"log={log.name} {log.status.lower()} in {call.elapsed:.3f}s"
			+ (f" (counted already as {was})" if was != "Started" else "")
		)
		self.tell(log, call.elapsed, counted=was != "Started")
		if was == "Started" and task is not None:
			run_events.run_started(log, task, schedule, self.start_lag_s)
			self.after(log, task, schedule, call.exc)
		if rows.repeat_log_in_stdout and log.stdout:
			sys.stdout.write(log.stdout + ("" if log.stdout.endswith("\n") else "\n"))
		return log

	def start_lag_ms(self) -> float | None:
		return round(self.start_lag_s * 1000, 3) if self.start_lag_s is not None else None

	def write_skipped(self, rows, reason: str):
		now = system_now()
		schedule = self.schedule_name if frappe.db.exists("BTU Task Schedule", self.schedule_name) else None
		log = frappe.get_doc(
			{
				"doctype": "BTU Task Log",
				**self.log_values(rows, "Skipped", schedule),
				"date_time_started": now,
				"date_time_ended": now,
				"execution_time": 0,
				"result_message": reason,
			}
		)
		log.insert(ignore_permissions=True)
		if self.request is not None:
			run_requests.mark_done(self.request, log.name)
			backfills.release_next(self.request)
		frappe.db.commit()
		self.event(f"log={log.name} skipped: {reason}")
		self.tell(log, None)
		return log

	def tell(self, log, elapsed: float | None, counted: bool = False) -> None:
		"""A finished run's outcome to Prometheus's counts (unless `counted` already), and the run to this job's (or
		request's) monitor entry."""
		if not counted:
			record_outcome(log.task, log.status, elapsed, self.start_lag_s)
		add_to_monitor(
			task=log.task,
			log=log.name,
			status=log.status,
			schedule=self.schedule_name,
			slot=format_utc_iso(self.slot) if self.slot else None,
			fire_lag_ms=self.fire_lag_ms,
			start_lag_ms=self.start_lag_ms(),
		)

	def event(self, text: str) -> None:
		slot = format_utc_iso(self.slot) if self.slot else "-"
		self.logger.info(
			f"site={frappe.local.site} task={self.task_name} schedule={self.schedule_name or '-'} slot={slot} {text}"
		)


def finished_documents(rows, task_name: str, schedule_name: str | None):
	"""The Task and Schedule as rows (`run_rows`) with the child tables what follows the call reads (mail, chains),
	those the run started with `rows` saying they are there; a Task deleted while it ran is None (its Log still
	ends), a Schedule deleted meanwhile too."""
	recipients = {"email_recipients": "BTU Email Recipient"} if rows.has_recipients else {}
	rules = {"alert_rules": "BTU Alert Rule"} if rows.has_alert_rules else {}
	chain = {"chained_tasks": "BTU Chained Task"} if rows.has_chain else {}
	task = document_rows("BTU Task", task_name, {**recipients, **rules, **chain})
	schedule = document_rows("BTU Task Schedule", schedule_name, {**recipients, **rules}) if task is not None else None
	for row in filter(None, (task, schedule)):
		row.setdefault("alert_rules", [])  # none when the run started: alerts reads no rules for it
	return task, schedule
