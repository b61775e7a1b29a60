"""The lost-run sweep: Logs still "Started" past their time limit plus a margin were lost with their worker; each is
marked Timed Out, mailed, counted, and followed by its retry, chain and alerts as a run's end is."""

from __future__ import annotations

from datetime import timedelta

import frappe

from btu.btu_core.alerts.notifications import notify
from btu.btu_core.insights.metrics import record_outcome
from btu.btu_core.instants import system_now
from btu.btu_core.runs.task_run import TaskRun
from btu.btu_core.runs.time_limit import LOST_RUN_MARGIN_SECS, max_duration


def mark_lost_runs_timed_out() -> list[str]:
	"""Logs still "Started" past their Task's max duration plus a margin: their worker died.

	RQ's own timeout turns a slow run into "Timed Out" inside the job; this
	sweep (every 5 minutes, btu_schedules in hooks.py) covers work-horses that were killed.
	A Log of an enqueued function (no Task) is timed by its request's timeout and queue.
	"""
	rows = frappe.db.sql(
		"""
		select log.name, log.task, log.date_time_started,
			coalesce(task.max_task_duration, request.timeout) as max_task_duration,
			coalesce(task.queue_name, request.queue) as queue_name
		from `tabBTU Task Log` log
		left join `tabBTU Task` task on task.name = log.task
		left join `tabBTU Run Request` request on request.name = log.run_request and request.origin = 'Enqueue'
		where log.status = 'Started'
			and (task.name is not null or (coalesce(log.task, '') = '' and request.name is not null))
		""",
		as_dict=True,
	)
	now = system_now()
	lost = []
	for row in rows:
		limit = max_duration(row)
		if not row.date_time_started or frappe.utils.get_datetime(row.date_time_started) > now - timedelta(
			seconds=limit + LOST_RUN_MARGIN_SECS
		):
			continue
		# Read again, locked until the commit below: a run that ended meanwhile is not lost (nor counted twice).
		log = frappe.get_doc("BTU Task Log", row.name, for_update=True)
		if log.status != "Started":
			frappe.db.rollback()
			continue
		log.status = "Timed Out"
		log.date_time_ended = now
		log.result_message = frappe._(
			"no end was recorded within max_task_duration ({0} s) + {1} s: the worker running it was killed or lost"
		).format(limit, LOST_RUN_MARGIN_SECS)
		task = frappe.get_doc("BTU Task", row.task) if row.task else None
		schedule = (
			frappe.get_doc("BTU Task Schedule", log.schedule)
			if log.schedule and frappe.db.exists("BTU Task Schedule", log.schedule)
			else None
		)
		note = notify(log, task, schedule) if task else None
		if note:
			log.logging_output = "\n".join(filter(None, [log.logging_output, note]))
		log.save(ignore_permissions=True)
		frappe.db.commit()
		if task:
			record_outcome(row.task, log.status)
			TaskRun.of_log(log, schedule).after(log, task, schedule, None)
		lost.append(log.name)
		what = f"task={row.task}" if task else f"method={log.method}"
		frappe.logger("btu").warning(
			f"site={frappe.local.site} log={log.name} {what} schedule={log.schedule or '-'} marked Timed Out (lost run)"
		)
	return lost
