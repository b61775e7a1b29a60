"""Task Duration Averages: min, average, 95th percentile and max run time per Task.

Summed up in SQL (btu.btu_core.insights.run_stats): min, average, max and the count exact, the 95th percentile within
run_stats.RELATIVE_ERROR.
"""

from __future__ import annotations

import frappe
from frappe import _
from frappe.utils import add_days, getdate, nowdate

from btu.btu_core.insights.run_stats import days, durations_per_task, plain_label


def execute(filters=None):
	filters = frappe._dict(filters or {})
	from_date = getdate(filters.get("from_date") or add_days(nowdate(), -30))
	to_date = getdate(filters.get("to_date") or nowdate())
	per_task = durations_per_task(days(from_date, to_date), filters.get("status") or "Succeeded", filters.get("task"))
	data = []
	for task, durations in sorted(per_task.items()):
		limit = (
			frappe.db.get_value("BTU Task", task, ["desc_short", "max_task_duration"], as_dict=True) or frappe._dict()
		)
		longest = durations.greatest()
		data.append(
			{
				"task": task,
				"task_description": limit.desc_short,
				"runs": durations.count,
				"min": durations.least(),
				"avg": durations.mean(),
				"p95": durations.percentile(0.95),
				"max": longest,
				"max_task_duration": limit.max_task_duration,
				"max_share_of_limit": (100 * longest / limit.max_task_duration) if limit.max_task_duration else None,
			}
		)
	return columns(), data, None, chart(data)


def columns():
	return [
		{"fieldname": "task", "label": _("Task"), "fieldtype": "Link", "options": "BTU Task", "width": 100},
		{"fieldname": "task_description", "label": _("Task Description"), "fieldtype": "Data", "width": 200},
		{"fieldname": "runs", "label": _("Runs"), "fieldtype": "Int", "width": 70},
		*(
			{"fieldname": key, "label": label, "fieldtype": "Float", "precision": 3, "width": 100}
			for key, label in (
				("min", _("Min (s)")),
				("avg", _("Average (s)")),
				("p95", _("95th pct (s)")),
				("max", _("Max (s)")),
			)
		),
		{"fieldname": "max_task_duration", "label": _("Limit (s)"), "fieldtype": "Int", "width": 80},
		{"fieldname": "max_share_of_limit", "label": _("Max % of Limit"), "fieldtype": "Percent", "width": 110},
	]


def chart(data):
	if not data:
		return None
	return {
		"data": {
			"labels": [plain_label(row["task_description"]) or row["task"] for row in data],
			"datasets": [
				{"name": _("Average (s)"), "values": [round(row["avg"], 3) for row in data]},
				{"name": _("95th pct (s)"), "values": [round(row["p95"], 3) for row in data]},
			],
		},
		"type": "bar",
	}
