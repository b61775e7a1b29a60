"""BTU Duration Percentiles: p50, p95 and max run time per Task over a period, slowest p95 first (run_stats says how
precise)."""

import frappe
from frappe import _

from btu.btu_core.insights import run_stats
from btu.btu_core.setup.roles import require_btu_manager


@frappe.whitelist()
def get(chart_name=None, chart=None, filters=None, from_date=None, to_date=None, timespan=None):
	"""The period is the filters' `timespan` (this chart is no time series, so the Desk shows no period picker)."""
	require_btu_manager()
	chart, filters = run_stats.chart_request(chart_name, chart, filters)
	status = filters.get("status") or "Succeeded"
	if status not in run_stats.FINISHED:
		frappe.throw(
			_("Unknown status {0}: choose one of {1}").format(status, ", ".join(_(s) for s in run_stats.FINISHED))
		)
	within = run_stats.period(chart, filters.get("timespan") or timespan, "Daily", from_date, to_date)
	spreads = {
		task: found.spread()
		for task, found in run_stats.durations_per_task(within, status, filters.get("task")).items()
	}
	if not spreads:
		return {}
	tasks = sorted(spreads, key=lambda task: (-spreads[task][1], task))
	names = labels(tasks)
	return {
		"labels": [names[task] for task in tasks],
		"datasets": [
			{"name": name, "values": [spreads[task][i] for task in tasks]}
			for i, name in enumerate(run_stats.spread_names(_("s")))
		],
	}


def labels(tasks: list[str]) -> dict[str, str]:
	"""Each Task's description as plain text (its name where empty); descriptions two Tasks share get the name too."""
	described = dict(
		frappe.get_all("BTU Task", filters={"name": ("in", tasks)}, fields=["name", "desc_short"], as_list=True)
	)
	plain = {task: run_stats.plain_label(described.get(task)) or task for task in tasks}
	shared = {text for text in plain.values() if list(plain.values()).count(text) > 1}
	return {task: f"{text} ({task})" if text in shared and text != task else text for task, text in plain.items()}
