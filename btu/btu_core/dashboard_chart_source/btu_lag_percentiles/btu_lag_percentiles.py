"""BTU Lag Percentiles: p50, p95 and max lag of scheduled runs per period (run_stats says how precise).

Fire lag is the slot to the job's enqueueing (the scheduler's part); start lag is the slot to the
run's start (the scheduler's part plus the wait for a worker). Both are wall-clock differences in
the system time zone, as the Task Log stores them. A period without scheduled runs is left out.
"""

import frappe
from frappe import _

from btu.btu_core.insights import run_stats
from btu.btu_core.setup.roles import require_btu_manager

MEASURES = ("Fire Lag", "Start Lag")


@frappe.whitelist()
def get(chart_name=None, chart=None, filters=None, from_date=None, to_date=None, timespan=None, time_interval=None):
	require_btu_manager()
	chart, filters = run_stats.chart_request(chart_name, chart, filters)
	measure = filters.get("measure") or "Fire Lag"
	if measure not in MEASURES:
		frappe.throw(_("Unknown measure {0}: choose {1} or {2}").format(measure, *(_(m) for m in MEASURES)))
	within = run_stats.period(chart, timespan, time_interval, from_date, to_date)
	log = run_stats.task_log()
	lag, has_lag = lag_of(log, measure)
	lags = run_stats.daily(log, lag, within, [*has_lag, *run_stats.task_filter(log, filters)])
	return run_stats.timeseries(within, lags, run_stats.spread_names(_("ms")), run_stats.Distribution.spread)


def lag_of(log, measure: str) -> tuple:
	"""(the lag in ms, the conditions of the runs that have one)."""
	if measure == "Fire Lag":
		return log.fire_lag_ms, [run_stats.is_set(log.fire_lag_ms)]
	# No slot (a run started by hand): no start lag, the difference is NULL.
	return run_stats.milliseconds_between(log.slot, log.date_time_started), []
