"""Task Log Summary: runs per Task (and schedule), or per enqueued function, by outcome, with the last run and fire
lag."""

from __future__ import annotations

import frappe
from frappe import _
from frappe.utils import add_days, getdate, nowdate

from btu.btu_core.setup.log_access import reads_enqueued_runs
from btu.shared.run_requests import ENQUEUE

STATUSES = ("Succeeded", "Failed", "Timed Out", "Skipped", "Started")


def execute(filters=None):
	filters = frappe._dict(filters or {})
	from_date = getdate(filters.get("from_date") or add_days(nowdate(), -7))
	to_date = getdate(filters.get("to_date") or nowdate())
	conditions = ["log.date_time_started >= %(from)s", "log.date_time_started < %(to)s"]
	values = {"from": from_date, "to": add_days(to_date, 1)}
	if filters.get("task"):
		conditions.append("log.task = %(task)s")
		values["task"] = filters.task
	if not reads_enqueued_runs(frappe.session.user):
		# As every list of Logs leaves them out (log_access): an enqueued run is its app's background job.
		conditions.append("coalesce(log.origin, '') != %(enqueue)s")
		values["enqueue"] = ENQUEUE
	status_columns = ",\n".join(
		f"sum(log.status = {frappe.db.escape(status)}) as `{frappe.scrub(status)}`" for status in STATUSES
	)
	data = frappe.db.sql(
		f"""
		select log.task, coalesce(task.desc_short, log.method) as task_description, log.schedule, log.method,
			count(*) as runs,
			{status_columns},
			max(log.date_time_started) as last_started,
			avg(log.fire_lag_ms) as avg_fire_lag_ms,
			max(log.fire_lag_ms) as max_fire_lag_ms
		from `tabBTU Task Log` log
		left join `tabBTU Task` task on task.name = log.task
		where {" and ".join(conditions)}
		group by log.task, task.desc_short, log.schedule, log.method
		order by log.task, log.schedule, log.method
		""",
		values,
		as_dict=True,
	)
	for row in data:
		row["last_status"] = frappe.db.get_value(
			"BTU Task Log",
			{
				"task": row.task or ("is", "not set"),
				"schedule": row.schedule or ("is", "not set"),
				"method": row.method or ("is", "not set"),
				"date_time_started": row.last_started,
			},
			"status",
		)
	return columns(), data


def columns():
	return [
		{"fieldname": "task", "label": _("Task"), "fieldtype": "Link", "options": "BTU Task", "width": 100},
		{"fieldname": "task_description", "label": _("Task Description"), "fieldtype": "Data", "width": 200},
		{
			"fieldname": "schedule",
			"label": _("Schedule"),
			"fieldtype": "Link",
			"options": "BTU Task Schedule",
			"width": 110,
		},
		{"fieldname": "runs", "label": _("Runs"), "fieldtype": "Int", "width": 70},
		*({"fieldname": frappe.scrub(s), "label": _(s), "fieldtype": "Int", "width": 90} for s in STATUSES),
		{"fieldname": "last_started", "label": _("Last Started"), "fieldtype": "Datetime", "width": 160},
		{"fieldname": "last_status", "label": _("Last Status"), "fieldtype": "Data", "width": 90},
		{
			"fieldname": "avg_fire_lag_ms",
			"label": _("Avg Fire Lag (ms)"),
			"fieldtype": "Float",
			"precision": 1,
			"width": 120,
		},
		{
			"fieldname": "max_fire_lag_ms",
			"label": _("Max Fire Lag (ms)"),
			"fieldtype": "Float",
			"precision": 1,
			"width": 120,
		},
	]
