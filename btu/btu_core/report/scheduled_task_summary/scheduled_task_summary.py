"""Scheduled Task Summary: each schedule's next fire (its zone, yours, UTC) and its last run."""

from __future__ import annotations

import frappe
from frappe import _
from frappe.query_builder.functions import Count
from frappe.utils import add_to_date, now_datetime

from btu.btu_core.messages import input_error
from btu.btu_core.schedules.preview import next_fires
from btu.shared.schedule import ScheduleError


def execute(filters=None):
	filters = frappe._dict(filters or {})
	conditions = {}
	if filters.get("enabled_only"):
		conditions["enabled"] = 1
	if filters.get("task"):
		conditions["task"] = filters.task
	since = add_to_date(now_datetime(), days=-1)
	data = []
	for name in frappe.get_list("BTU Task Schedule", filters=conditions, pluck="name", order_by="name"):
		doc = frappe.get_doc("BTU Task Schedule", name)
		row = {
			"schedule": doc.name,
			"task": doc.task,
			"task_description": doc.task_description,
			"enabled": doc.enabled,
			"paused": doc.paused,
			"time_zone": doc.time_zone,
		}
		try:
			preview = next_fires(doc, 1)
			row["schedule_description"] = preview["description"]
			row["time_zone"] = preview["time_zone"]
			if preview["fires"] and doc.enabled and not doc.paused:
				first = preview["fires"][0]
				row.update(
					next_fire_zone=first["schedule_zone"], next_fire_user=first["user_zone"], next_fire_utc=first["utc"]
				)
		except ScheduleError as exc:
			row["schedule_description"] = _("INVALID: {0}").format(input_error(exc))
		last = frappe.get_all(
			"BTU Task Log",
			filters={"schedule": doc.name},
			fields=["name", "status", "slot_utc", "date_time_started", "execution_time"],
			order_by="creation desc",
			limit=1,
		)
		if last:
			row.update(
				last_log=last[0].name,
				last_status=last[0].status,
				last_slot_utc=last[0].slot_utc,
				last_started=last[0].date_time_started,
				last_duration=last[0].execution_time,
			)
		counts = runs_since(doc.name, since)
		row["runs_24h"] = sum(counts.values())
		row["failures_24h"] = sum(n for (status, _origin), n in counts.items() if status in ("Failed", "Timed Out"))
		row["retries_24h"] = sum(n for (_status, origin), n in counts.items() if origin == "Retry")
		row["backfilled_24h"] = sum(n for (_status, origin), n in counts.items() if origin == "Backfill")
		row["pending_runs"] = frappe.db.count(
			"BTU Run Request", {"schedule": doc.name, "status": ("in", ("Pending", "Waiting"))}
		)
		data.append(row)
	return columns(), data


def runs_since(schedule: str, since) -> dict[tuple[str, str], int]:
	"""The schedule's Logs created since `since`, per (status, origin): frappe.qb, as Frappe v16 refuses count(*) in
	get_all's fields."""
	log = frappe.qb.DocType("BTU Task Log")
	query = (
		frappe.qb.from_(log)
		.select(log.status, log.origin, Count("*"))
		.where((log.schedule == schedule) & (log.creation >= since))
		.groupby(log.status, log.origin)
	)
	return {(status, origin or ""): int(runs) for status, origin, runs in query.run()}


def columns():
	return [
		{
			"fieldname": "schedule",
			"label": _("Schedule"),
			"fieldtype": "Link",
			"options": "BTU Task Schedule",
			"width": 110,
		},
		{"fieldname": "task", "label": _("Task"), "fieldtype": "Link", "options": "BTU Task", "width": 100},
		{"fieldname": "task_description", "label": _("Task Description"), "fieldtype": "Data", "width": 180},
		{"fieldname": "enabled", "label": _("Enabled"), "fieldtype": "Check", "width": 70},
		{"fieldname": "paused", "label": _("Paused"), "fieldtype": "Check", "width": 70},
		{"fieldname": "schedule_description", "label": _("When"), "fieldtype": "Data", "width": 260},
		{"fieldname": "time_zone", "label": _("Zone"), "fieldtype": "Data", "width": 130},
		{"fieldname": "next_fire_zone", "label": _("Next Fire (schedule zone)"), "fieldtype": "Data", "width": 200},
		{"fieldname": "next_fire_user", "label": _("Next Fire (your zone)"), "fieldtype": "Data", "width": 200},
		{"fieldname": "next_fire_utc", "label": _("Next Fire (UTC)"), "fieldtype": "Data", "width": 170},
		{"fieldname": "last_log", "label": _("Last Log"), "fieldtype": "Link", "options": "BTU Task Log", "width": 130},
		{"fieldname": "last_status", "label": _("Last Status"), "fieldtype": "Data", "width": 90},
		{"fieldname": "last_slot_utc", "label": _("Last Slot (UTC)"), "fieldtype": "Data", "width": 170},
		{"fieldname": "last_started", "label": _("Last Started"), "fieldtype": "Datetime", "width": 160},
		{
			"fieldname": "last_duration",
			"label": _("Last Duration (s)"),
			"fieldtype": "Float",
			"precision": 3,
			"width": 110,
		},
		{"fieldname": "runs_24h", "label": _("Runs (24 h)"), "fieldtype": "Int", "width": 90},
		{"fieldname": "failures_24h", "label": _("Failures (24 h)"), "fieldtype": "Int", "width": 100},
		{"fieldname": "retries_24h", "label": _("Retries (24 h)"), "fieldtype": "Int", "width": 100},
		{"fieldname": "backfilled_24h", "label": _("Backfilled (24 h)"), "fieldtype": "Int", "width": 110},
		{"fieldname": "pending_runs", "label": _("Retries/Backfills Pending"), "fieldtype": "Int", "width": 120},
	]
