"""The BTU dashboard's custom Number Cards: today's failure rate and p95 fire lag.

Frappe calls a card's method with the card's `filters`; these cards have none.
"""

import frappe
from frappe import _
from frappe.utils import fmt_money, getdate

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
def fire_lag_p95_today(filters=None) -> str:
	"""The 95th percentile fire lag of today's scheduled runs (run_stats says how precise), as text with its unit.

	Text, as a custom card's method may return: Frappe's card shortens and formats a number itself, without a unit
	("57.900 K" for 57.9 s). The card's click then opens nothing: Frappe reads a route from a returned dict only.
	"""
	require_btu_manager()
	within = run_stats.today()
	log = run_stats.task_log()
	lags = run_stats.daily(log, log.fire_lag_ms, within, [run_stats.is_set(log.fire_lag_ms)]).get(getdate(within.start))
	return readable_ms(lags.percentile(0.95)) if lags else _("No runs")


def readable_ms(ms: float) -> str:
	"""`ms` to 3 significant digits in ms, s, min or h, as the site formats numbers: "1.9 ms", "57.9 s"."""
	value, unit = float(f"{ms:.3g}"), "ms"
	for size, name in ((3_600_000, "h"), (60_000, "min"), (1000, "s")):
		if value >= size:
			value, unit = float(f"{value / size:.3g}"), name
			break
	text = f"{value:f}".rstrip("0")
	decimals = len(text.split(".")[1])
	return f"{fmt_money(value, precision=decimals)} {_(unit)}"
