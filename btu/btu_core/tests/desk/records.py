"""What the browser tests make for the web server to see, committed (it is another process), and take away again;
and what it committed, read past this test's own transaction."""

from __future__ import annotations

import json
from datetime import datetime, timedelta

import frappe
from frappe.utils.background_jobs import get_redis_conn

from btu.btu_core.scheduler_link import bench_keys, scheduler_running
from btu.btu_core.tests.desk.people import LOGINS, Person
from btu.btu_core.tests.utils import make_task, sealed_value
from btu.shared import protocol
from btu.shared.sealed import is_sealed


def unique(prefix: str) -> str:
	return f"{prefix} {frappe.generate_hash(length=8)}"


def committed_task(case, function: str = "say_hello", **values) -> str:
	"""A Task of the sample `function`, removed with all it left after the test, or after the class when `case` is
	one."""
	frappe.set_user("Administrator")
	values.setdefault("desc_short", unique(f"desk {function}"))
	task = make_task(function, **values).name
	frappe.db.commit()
	cleanup = case.addClassCleanup if isinstance(case, type) else case.addCleanup
	cleanup(remove_task, task)
	return task


def remove_task(task: str) -> None:
	"""The Task with its schedules, run requests, logs and alert incidents."""
	frappe.db.rollback()
	frappe.set_user("Administrator")
	for doctype in ("BTU Alert Incident", "BTU Run Request", "BTU Task Log"):
		frappe.db.delete(doctype, {"task": task})
	schedules = frappe.get_all("BTU Task Schedule", filters={"task": task}, pluck="name")
	if not scheduler_running():
		# Deleting an enabled schedule tells the scheduler, and waits 5 s for one that is not there.
		frappe.db.set_value("BTU Task Schedule", {"task": task}, "enabled", 0, update_modified=False)
		drop_commands(schedules)
	for name in schedules:
		frappe.delete_doc("BTU Task Schedule", name, force=True, ignore_permissions=True)
	frappe.delete_doc("BTU Task", task, force=True, ignore_permissions=True)
	frappe.db.commit()


def drop_commands(schedules: list[str]) -> None:
	"""Take off Redis the commands the person's saves left for a scheduler that is not running: Frappe reuses the
	name of the last schedule deleted, and a later test of the same name would find them."""
	connection = get_redis_conn()
	for raw in connection.lrange(bench_keys().commands, 0, -1):
		command = json.loads(raw)
		if command.get("site") == frappe.local.site and command.get("request_content") in schedules:
			connection.lrem(bench_keys().commands, 0, raw)


def committed_logs(task: str, rows: list[dict], schedule: str | None = None) -> list[str]:
	"""Task Logs of `task` (and `schedule`): each row's started (a datetime), status, fire_lag_ms and seconds."""
	names = []
	for row in rows:
		started: datetime = row["started"]
		log = frappe.get_doc(
			{
				"doctype": "BTU Task Log",
				"task": task,
				"schedule": schedule,
				"status": row.get("status", "Succeeded"),
				"date_time_started": started,
				"execution_time": row.get("seconds"),
				"fire_lag_ms": row.get("fire_lag_ms"),
				# A scheduled run: its slot as long before its start as its fire lag (a run started by hand has none).
				"slot": started - timedelta(milliseconds=row["fire_lag_ms"]) if "fire_lag_ms" in row else None,
			}
		).insert(ignore_permissions=True)
		names.append(log.name)
	frappe.db.commit()
	return names


def restore_single(case, doctype: str, *fieldnames: str) -> None:
	"""Put the Single's fields back as they are now after the test (a person's save changes them)."""
	kept = {fieldname: frappe.db.get_single_value(doctype, fieldname) for fieldname in fieldnames}

	def restore():
		frappe.db.rollback()
		for fieldname, value in kept.items():
			frappe.db.set_single_value(doctype, fieldname, value)
		frappe.db.commit()

	case.addCleanup(restore)


def in_zone(case, person: Person, zone: str) -> None:
	"""The person's own time zone (User.time_zone) is `zone` until the test ends; their next page load shows it."""
	set_zone(LOGINS[person].email, zone)
	case.addCleanup(set_zone, LOGINS[person].email, "")


def set_zone(email: str, zone: str) -> None:
	user = frappe.get_doc("User", email)
	user.time_zone = zone
	user.save(ignore_permissions=True)
	frappe.db.commit()


def fresh_value(doctype: str, filters, field="name"):
	"""A value as the web server committed it by now: the test's own transaction would keep showing what it read
	before."""
	frappe.db.rollback()
	fields = [field] if isinstance(field, str) else list(field)
	name = frappe.db.get_value(doctype, filters)
	found = frappe.db.get_value(doctype, filters, fields)
	found = list(found) if isinstance(found, list | tuple) else [found]
	values = [sealed_value(doctype, name, f) if is_sealed(doctype, f) else value for f, value in zip(fields, found)]
	return values[0] if isinstance(field, str) else tuple(values)


def fresh_single(doctype: str, fieldname: str):
	"""A Single's value as the web server committed it, read from the table: besides the transaction, Frappe keeps a
	value cache per connection."""
	frappe.db.rollback()
	found = frappe.db.sql("select value from tabSingles where doctype = %s and field = %s", (doctype, fieldname))
	return found[0][0] if found else None
