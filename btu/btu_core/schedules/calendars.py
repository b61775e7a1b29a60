"""A BTU Calendar's excluded dates as a schedule's spec reads them (its own dates and its ERPNext/HRMS Holiday List's,
within the scheduler's window), and its schedules re-announced when it changes. The semantics are btu.shared.schedule's:
a calendar's dates are skipped or their runs moved."""

from __future__ import annotations

from datetime import datetime

import frappe

from btu.btu_core.instants import utc_now
from btu.btu_core.scheduler_link import announce_after_commit
from btu.shared import protocol
from btu.shared.schedule.row import calendar_window

# A calendar's own dates; beyond it a Holiday List (or a second calendar) is the tool.
MAX_CALENDAR_DATES = 10_000


def holiday_lists_installed() -> bool:
	"""Whether the site has ERPNext/HRMS's Holiday List (its dates live in tabHoliday)."""
	return bool(frappe.db.exists("DocType", "Holiday List")) and frappe.db.table_exists("Holiday")


def calendar_dates(calendar: str | None, now: datetime | None = None) -> list:
	"""The excluded dates of a calendar in calendar_window: its own and its Holiday List's, sorted, unique."""
	if not calendar:
		return []
	low, high = calendar_window((now or utc_now()).date())
	days = set(
		frappe.get_all(
			"BTU Calendar Date",
			filters={"parent": calendar, "parenttype": "BTU Calendar", "date": ["between", [low, high]]},
			pluck="date",
		)
	)
	holiday_list = frappe.db.get_value("BTU Calendar", calendar, "holiday_list")
	if holiday_list and holiday_lists_installed():
		days |= set(
			frappe.db.sql(
				"SELECT holiday_date FROM `tabHoliday` WHERE parent = %s AND holiday_date BETWEEN %s AND %s",
				(holiday_list, low, high),
				pluck=True,
			)
		)
	return sorted(days)


def announce_users_of(calendar: str) -> None:
	"""Tell the scheduler about every enabled schedule that uses `calendar`, after commit."""
	for name in frappe.get_all(
		"BTU Task Schedule", filters={"calendar": calendar, "enabled": 1}, pluck="name", order_by="name"
	):
		announce_after_commit(protocol.CREATE_TASK_SCHEDULE, name)
