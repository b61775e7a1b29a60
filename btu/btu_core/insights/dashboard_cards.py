"""The BTU dashboard's custom Number Cards: today's failure rate and p95 fire lag.

Frappe calls a card's method with the card's `filters`; these cards have none.
"""

from __future__ import annotations

import frappe
from frappe.utils import getdate

from btu.btu_core.insights import run_stats
from btu.btu_core.setup.roles import require_btu_manager


@frappe.whitelist()
def failure_rate_today(filters=None) -> dict:
	"""Failed and Timed Out over finished runs started today, in %."""
	require_btu_manager()
	within = run_stats.today()
	per_status: dict[str, int] = {}
	for counts in run_stats.status_counts(run_stats.task_log(), within).values():
		for status, runs in counts.items():
			per_status[status] = per_status.get(status, 0) + runs
	return {
		"value": run_stats.failure_rate(per_status),
		"fieldtype": "Percent",
		"route": ["List", run_stats.LOG],
		"route_options": {"status": ["in", list(run_stats.FAILED)], "date_time_started": [">=", str(within.start)]},
	}


@frappe.whitelist()
def fire_lag_p95_today(filters=None) -> dict:
	"""The 95th percentile fire lag of today's scheduled runs, in ms (run_stats says how precise); 0 when none ran."""
	require_btu_manager()
	within = run_stats.today()
	log = run_stats.task_log()
	lags = run_stats.daily(log, log.fire_lag_ms, within, [run_stats.is_set(log.fire_lag_ms)]).get(getdate(within.start))
	return {
		"value": lags.spread()[1] if lags else 0,
		"fieldtype": "Float",
		"route": ["List", run_stats.LOG],
		"route_options": {"date_time_started": [">=", str(within.start)], "fire_lag_ms": ["is", "set"]},
	}
