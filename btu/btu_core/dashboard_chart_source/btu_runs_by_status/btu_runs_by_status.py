"""BTU Runs by Status: how many runs started per period, one dataset per Task Log status (0 where none)."""

import frappe
from frappe import _

from btu.btu_core.insights import run_stats
from btu.btu_core.setup.roles import require_btu_manager


@frappe.whitelist()
def get(chart_name=None, chart=None, filters=None, from_date=None, to_date=None, timespan=None, time_interval=None):
	require_btu_manager()
	chart, filters = run_stats.chart_request(chart_name, chart, filters)
	within = run_stats.period(chart, timespan, time_interval, from_date, to_date)
	log = run_stats.task_log()
	counts = run_stats.status_counts(log, within, run_stats.task_filter(log, filters))
	names = [_(status) for status in run_stats.STATUSES]
	zeros = [0] * len(names)
	return run_stats.timeseries(
		within, counts, names, lambda per_status: [per_status.get(s, 0) for s in run_stats.STATUSES], zeros
	)
