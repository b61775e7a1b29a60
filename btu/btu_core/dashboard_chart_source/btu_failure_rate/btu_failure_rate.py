"""BTU Failure Rate: Failed and Timed Out runs over finished runs (Succeeded, Failed, Timed Out), in % per period.

A period without finished runs is left out: it had no rate, not a rate of 0.
"""

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
	counts = run_stats.status_counts(
		log, within, [log.status.isin(run_stats.FINISHED), *run_stats.task_filter(log, filters)]
	)
	return run_stats.timeseries(
		within, counts, [_("Failure rate (%)")], lambda per_status: [run_stats.failure_rate(per_status)]
	)
