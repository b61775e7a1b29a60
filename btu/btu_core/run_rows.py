"""What a run reads and writes before its function is called, as rows: one SELECT for the Task and its Schedule, one
INSERT for the Started Log.

A run's start lies between its moment and the function's first line, in a work-horse that RQ forks for every job:
each module it imports and each round trip is paid on every run. Frappe's Document costs a work-horse hundreds of
milliseconds from source on its first use (its module, the DocType's Meta, `frappe.model.create_new` for defaults and,
on every insert and save, the Notification machinery), and `frappe.db.get_value` loads Frappe's query engine. So the
start reads and writes plain rows; everything after the call (the Log's end, retries, chains, alerts, mail) loads
Documents as before. The Started Log is the row alone, as BTU Run Requests are (`run_requests.insert`): no Document
hooks run for it; its end is a `save`, on which a Notification or hook on BTU Task Log fires.
"""

from __future__ import annotations

import frappe

from btu.btu_core.instants import to_system_naive, utc_now

LOG = "BTU Task Log"
# btu_task_log.json's autoname (test_run_path checks they agree): a Log named as Document.insert would name it, from
# the same tabSeries row (its prefix) and with as many digits.
LOG_NAMING = "BTLOG-.#######"
LOG_SERIES, LOG_DIGITS = LOG_NAMING.split(".")[0], LOG_NAMING.count("#")
# What a run reads of its Task before the call; whether a recipient of the Task or the Schedule wants mail on start.
TASK_AND_SCHEDULE_SQL = """
select task.name, task.desc_short, task.function_string, task.arguments, task.queue_name, task.max_task_duration,
	task.repeat_log_in_stdout, schedule.name as schedule, schedule.overlap_policy, schedule.argument_overrides,
	exists(
		select 1 from `tabBTU Email Recipient` recipient where recipient.email_on_start = 1
		and ((recipient.parenttype = 'BTU Task' and recipient.parent = task.name)
			or (recipient.parenttype = 'BTU Task Schedule' and recipient.parent = schedule.name))
	) as mail_on_start
from `tabBTU Task` task left join `tabBTU Task Schedule` schedule on schedule.name = %(schedule)s
where task.name = %(task)s
"""


def task_and_schedule(task: str, schedule: str | None) -> frappe._dict:
	"""The Task's fields a run starts with and its Schedule's (`schedule` None when it names none or it is gone); a
	Task that is gone raises frappe.DoesNotExistError, as frappe.get_doc would."""
	rows = frappe.db.sql(TASK_AND_SCHEDULE_SQL, {"task": task, "schedule": schedule or ""}, as_dict=True)
	if not rows:
		raise frappe.DoesNotExistError(frappe._("BTU Task {0} not found: it was deleted after this run was queued").format(task))
	return rows[0]


def insert_started_log(values: dict) -> str:
	"""Insert a Log row with `values` (None left to the column's default) in the current transaction: its name."""
	# getseries, not make_autoname: that one reads the date for series that hold one, through System Settings loaded
	# as a Document (a work-horse would import Document for it); this series holds none.
	from frappe.model.naming import getseries

	now = to_system_naive(utc_now())  # frappe.utils.now_datetime would load System Settings as a Document
	user = frappe.session.user if getattr(frappe.local, "session", None) else "Administrator"
	row = {
		"name": LOG_SERIES + getseries(LOG_SERIES, LOG_DIGITS),
		"creation": now, "modified": now, "owner": user, "modified_by": user, "docstatus": 0, "idx": 0,
		**{field: value for field, value in values.items() if value is not None},
	}
	columns = ", ".join(f"`{field}`" for field in row)
	frappe.db.sql(f"insert into `tab{LOG}` ({columns}) values ({', '.join(['%s'] * len(row))})", list(row.values()))
	return row["name"]
