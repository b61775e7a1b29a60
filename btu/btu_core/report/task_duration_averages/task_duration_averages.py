"""Task Duration Averages: min, average, 95th percentile and max run time per Task."""

from __future__ import annotations

import math

import frappe
from frappe import _
from frappe.utils import add_days, getdate, nowdate


def execute(filters=None):
	filters = frappe._dict(filters or {})
	from_date = getdate(filters.get("from_date") or add_days(nowdate(), -30))
	to_date = getdate(filters.get("to_date") or nowdate())
	log_filters = {
		"status": filters.get("status") or "Succeeded",
		"date_time_started": ("between", [from_date, add_days(to_date, 1)]),
		"execution_time": ("is", "set"),
	}
	if filters.get("task"):
		log_filters["task"] = filters.task
	durations: dict[str, list[float]] = {}
	for log in frappe.get_all("BTU Task Log", filters=log_filters, fields=["task", "execution_time"]):
		durations.setdefault(log.task, []).append(float(log.execution_time))
	data = []
	for task, values in sorted(durations.items()):
		values.sort()
		limit = frappe.db.get_value("BTU Task", task, ["desc_short", "max_task_duration"], as_dict=True) or frappe._dict()
		p95 = values[max(0, math.ceil(0.95 * len(values)) - 1)]
		data.append(
			{
				"task": task,
				"task_description": limit.desc_short,
				"runs": len(values),
				"min": values[0],
				"avg": sum(values) / len(values),
				"p95": p95,
				"max": values[-1],
				"max_task_duration": limit.max_task_duration,
				"max_share_of_limit": (100 * values[-1] / limit.max_task_duration) if limit.max_task_duration else None,
			}
		)
	return columns(), data, None, chart(data)


def columns():
	return [
		{"fieldname": "task", "label": _("Task"), "fieldtype": "Link", "options": "BTU Task", "width": 100},
		{"fieldname": "task_description", "label": _("Task Description"), "fieldtype": "Data", "width": 200},
		{"fieldname": "runs", "label": _("Runs"), "fieldtype": "Int", "width": 70},
		*({"fieldname": key, "label": label, "fieldtype": "Float", "precision": 3, "width": 100} for key, label in (("min", _("Min (s)")), ("avg", _("Average (s)")), ("p95", _("95th pct (s)")), ("max", _("Max (s)")))),
		{"fieldname": "max_task_duration", "label": _("Limit (s)"), "fieldtype": "Int", "width": 80},
		{"fieldname": "max_share_of_limit", "label": _("Max % of Limit"), "fieldtype": "Percent", "width": 110},
	]


def chart(data):
	if not data:
		return None
	return {
		"data": {
			"labels": [row["task_description"] or row["task"] for row in data],
			"datasets": [{"name": _("Average (s)"), "values": [round(row["avg"], 3) for row in data]}, {"name": _("95th pct (s)"), "values": [round(row["p95"], 3) for row in data]}],
		},
		"type": "bar",
	}
