"""What a run reads and writes as rows: the Task and its Schedule, the Log's start and its end.

A run's start lies between its moment and the function's first line, and its cost in a work-horse that RQ forks for
every job: each module it imports and each round trip is paid on every run. Frappe's Document costs a work-horse
hundreds of milliseconds of CPU on its first use (its module and imports, the DocType's Meta, and on every save the
Notification machinery and every app's `doc_events`), and `frappe.db.get_value` loads Frappe's query engine. So a run
reads and writes plain rows, before and after its call. The Log is a Document again only where the site listens to
its changes (`log_listened`): a Notification, a Webhook, a DocType Event Server Script or an app's `doc_events` hook
on BTU Task Log; then its end is a `save` and they fire as for any Document. Frappe's generic hooks for every DocType
(`doc_events` "*": assignment rules, energy points, milestones) do not run on a Log's rows, as on a Run Request's.
"""

from __future__ import annotations

import json
from contextlib import suppress

import frappe
import redis
from frappe.realtime import get_doc_room, get_doctype_room
from frappe.utils.background_jobs import get_redis_connection_without_auth

from btu.btu_core.instants import to_system_naive, utc_now
from btu.btu_core.sealed import store
from btu.shared.sealed import FIELDS as SEALED_FIELDS
from btu.shared.sealed import value_sql

LOG = "BTU Task Log"
# btu_task_log.json's autoname (test_run_path checks they agree): a Log named as Document.insert would name it, from
# the same tabSeries row (its prefix) and with as many digits.
LOG_NAMING = "BTLOG-.#######"
LOG_SERIES, LOG_DIGITS = LOG_NAMING.split(".")[0], LOG_NAMING.count("#")
# The Log's Float, Int and Check fields (test_run_path checks them against its Meta): Frappe makes their columns NOT
# NULL, and a Document writes 0 for None.
LOG_NUMBERS = ("execution_time", "fire_lag_ms", "start_lag_ms", "attempt", "retried")
# A Log's end: what its call decided (capture.Call.log_values), when it ended, the start lag and the logging output.
END_FIELDS = (
	"status",
	"execution_time",
	"result_message",
	"stdout",
	"stderr",
	"traceback",
	"date_time_ended",
	"start_lag_ms",
	"logging_output",
)
# What a run reads of its Task before the call; whether a recipient of the Task or the Schedule wants mail on start,
# and whether they have recipients, chained tasks or alert rules at all (what follows the call reads those only then).
TASK_AND_SCHEDULE_SQL = f"""
select task.name, task.desc_short, task.function_string, {value_sql("BTU Task", "arguments", "task")} as arguments,
	task.queue_name, task.max_task_duration, task.repeat_log_in_stdout, schedule.name as schedule,
	schedule.overlap_policy, {value_sql("BTU Task Schedule", "argument_overrides", "schedule")} as argument_overrides,
	exists(
		select 1 from `tabBTU Email Recipient` recipient where recipient.email_on_start = 1
		and ((recipient.parenttype = 'BTU Task' and recipient.parent = task.name)
			or (recipient.parenttype = 'BTU Task Schedule' and recipient.parent = schedule.name))
	) as mail_on_start,
	exists(
		select 1 from `tabBTU Email Recipient` recipient
		where (recipient.parenttype = 'BTU Task' and recipient.parent = task.name)
			or (recipient.parenttype = 'BTU Task Schedule' and recipient.parent = schedule.name)
	) as has_recipients,
	exists(
		select 1 from `tabBTU Chained Task` link where link.parenttype = 'BTU Task' and link.parent = task.name
	) as has_chain,
	exists(
		select 1 from `tabBTU Alert Rule` rule
		where (rule.parenttype = 'BTU Task' and rule.parent = task.name)
			or (rule.parenttype = 'BTU Task Schedule' and rule.parent = schedule.name)
	) as has_alert_rules
from `tabBTU Task` task left join `tabBTU Task Schedule` schedule on schedule.name = %(schedule)s
where task.name = %(task)s
"""


def task_and_schedule(task: str, schedule: str | None) -> frappe._dict:
	"""The Task's fields a run starts with and its Schedule's (`schedule` None when it names none or it is gone); a
	Task that is gone raises frappe.DoesNotExistError, as frappe.get_doc would."""
	rows = frappe.db.sql(TASK_AND_SCHEDULE_SQL, {"task": task, "schedule": schedule or ""}, as_dict=True)
	if not rows:
		raise frappe.DoesNotExistError(
			frappe._("BTU Task {0} not found: it was deleted after this run was queued").format(task)
		)
	return rows[0]


def insert_log(values: dict) -> str:
	"""Insert a Log row with `values` (None left to the column's default) in the current transaction: its name."""
	# getseries, not make_autoname: that one reads the date for series that hold one, through System Settings loaded
	# as a Document (a work-horse would import Document for it); this series holds none.
	from frappe.model.naming import getseries

	now = to_system_naive(utc_now())  # frappe.utils.now_datetime would load System Settings as a Document
	user = session_user()
	row = {
		"name": LOG_SERIES + getseries(LOG_SERIES, LOG_DIGITS),
		"creation": now,
		"modified": now,
		"owner": user,
		"modified_by": user,
		"docstatus": 0,
		"idx": 0,
		**{field: value for field, value in values.items() if value is not None and field not in SEALED_FIELDS[LOG]},
	}
	columns = ", ".join(f"`{field}`" for field in row)
	frappe.db.sql(f"insert into `tab{LOG}` ({columns}) values ({', '.join(['%s'] * len(row))})", list(row.values()))
	sealed = {field: value for field, value in values.items() if field in SEALED_FIELDS[LOG]}
	if sealed:
		store.write(LOG, row["name"], sealed)
	return row["name"]


# Whether anything on the site acts on a BTU Task Log's save: what Document.save would run for it beyond its own
# controller (which has none), read in one round trip.
LOG_LISTENERS_SQL = """
select exists(select 1 from `tabNotification` where enabled = 1 and document_type = %(doctype)s)
	or exists(select 1 from `tabWebhook` where enabled = 1 and webhook_doctype = %(doctype)s)
	or exists(
		select 1 from `tabServer Script`
		where disabled = 0 and script_type = 'DocType Event' and reference_doctype = %(doctype)s
	)
"""


def log_listened() -> bool:
	"""A Notification, Webhook or DocType Event Server Script on BTU Task Log, or an app's doc_events hook naming it."""
	if LOG in frappe.get_doc_hooks():
		return True
	return bool(frappe.db.sql(LOG_LISTENERS_SQL, {"doctype": LOG})[0][0])


def locked_log(name: str) -> frappe._dict:
	"""The Log's row, locked until the transaction ends (the lost-run sweep waits for a run's end), its fields as
	attributes and its `doctype` set, as a Document's; its sealed fields are not read (a run's end writes them)."""
	rows = frappe.db.sql(f"select * from `tab{LOG}` where name = %s for update", name, as_dict=True)
	if not rows:
		raise frappe.DoesNotExistError(
			frappe._("BTU Task Log {0} not found: it was deleted while its run ran").format(name)
		)
	return frappe._dict(rows[0], doctype=LOG)


def save_log(log: frappe._dict, fields) -> None:
	"""Write `fields` of `log` (a `locked_log`) in the current transaction: a Document `save` where the site listens to
	the Log's changes, else one UPDATE and the Desk's form and list told after commit, as a save tells them."""
	if log_listened():
		doc = frappe.get_doc(LOG, log.name)
		doc.update({field: log[field] for field in fields})
		doc.save(ignore_permissions=True)
		log.modified = doc.modified
		return
	log.modified, log.modified_by = to_system_naive(utc_now()), session_user()
	update_log(
		log.name,
		{
			field: 0 if log[field] is None and field in LOG_NUMBERS else log[field]
			for field in (*fields, "modified", "modified_by")
		},
	)
	messages = desk_messages(log)
	frappe.db.after_commit.add(lambda: publish(messages))


def update_log(name: str, values: dict) -> None:
	"""Write `values` to the Log `name` by SQL, each where it is kept: its row, or the sealed table."""
	sealed = {field: value for field, value in values.items() if field in SEALED_FIELDS[LOG]}
	rest = {field: value for field, value in values.items() if field not in sealed}
	if rest:
		assignments = ", ".join(f"`{field}` = %s" for field in rest)
		frappe.db.sql(f"update `tab{LOG}` set {assignments} where name = %s", [*rest.values(), name])
	if sealed:
		store.write(LOG, name, sealed)


def desk_messages(log: frappe._dict) -> list[dict]:
	"""What Document.notify_update publishes for a saved Log: its form's doc_update and the list's list_update (the
	Desk refreshes an open form or list on them). test_run_path checks them against a Document's save."""
	site = frappe.local.site
	return [
		{
			"event": "doc_update",
			"message": {"modified": str(log.modified), "doctype": LOG, "name": log.name},
			"room": get_doc_room(LOG, log.name),
			"namespace": site,
		},
		{
			"event": "list_update",
			"message": {"doctype": LOG, "name": log.name, "user": log.modified_by},
			"room": get_doctype_room(LOG),
			"namespace": site,
		},
	]


def publish(messages: list[dict]) -> None:
	"""Publish realtime `messages` as frappe.realtime.emit_via_redis does, without frappe.publish_realtime: its JSON
	encoder (frappe.utils.response) imports Document and sessions into the work-horse, about 100 ms of CPU from source
	on every run. Their values are strings already."""
	with suppress(redis.exceptions.ConnectionError):
		connection = get_redis_connection_without_auth()
		for message in messages:
			connection.publish("events", json.dumps(message, sort_keys=True))


def session_user() -> str:
	return frappe.session.user if getattr(frappe.local, "session", None) else "Administrator"


def document_rows(doctype: str, name: str | None, tables: dict[str, str]) -> frappe._dict | None:
	"""A document's row and its child `tables` ({fieldname: child doctype}) as rows, its fields as attributes (as a
	Document's, for reading); None when `name` is None or gone."""
	if not name:
		return None
	rows = frappe.db.sql(f"select * from `tab{doctype}` where name = %s", name, as_dict=True)
	if not rows:
		return None
	row = frappe._dict(rows[0], doctype=doctype)
	for field, child in tables.items():
		row[field] = frappe.db.sql(
			f"select * from `tab{child}` where parent = %s and parenttype = %s and parentfield = %s order by idx",
			(name, doctype, field),
			as_dict=True,
		)
	return row
