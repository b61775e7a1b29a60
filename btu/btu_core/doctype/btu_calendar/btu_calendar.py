"""BTU Calendar: dates schedules do not run on (their own, and an ERPNext/HRMS Holiday List's).

A schedule that links a calendar skips its dates or moves their runs to the
next day not excluded (btu.shared.schedule). The scheduler reads the dates
when it compiles the schedule, so saving a calendar re-announces every
enabled schedule that uses it, as saving the schedule would.
"""

from __future__ import annotations

import frappe
from frappe import _
from frappe.utils import getdate

from btu.btu_core.field_bounds import BoundedDocument
from btu.btu_core.schedules import calendars


class BTUCalendar(BoundedDocument):
	# Frappe's exporter writes this block with its imports sorted as text; isort would reorder them.
	# isort: off
	# begin: auto-generated types
	# This code is auto-generated. Do not modify anything in this block.

	from typing import TYPE_CHECKING

	if TYPE_CHECKING:
		from btu.btu_core.doctype.btu_calendar_date.btu_calendar_date import BTUCalendarDate
		from frappe.types import DF

		calendar_name: DF.Data
		dates: DF.Table[BTUCalendarDate]
		description: DF.SmallText | None
		holiday_list: DF.Data | None

	# end: auto-generated types
	# isort: on
	def validate(self):
		if len(self.dates) > calendars.MAX_CALENDAR_DATES:
			frappe.throw(
				_("{0} dates: a calendar holds at most {1}; remove past years or split it").format(
					len(self.dates), calendars.MAX_CALENDAR_DATES
				),
				title=_("Too many dates"),
			)
		seen = set()
		kept = []
		for row in self.dates:
			try:
				day = getdate(row.date)
			except Exception:
				frappe.throw(
					_("Row {0}: '{1}' is not a date; use YYYY-MM-DD").format(row.idx, row.date), title=_("Invalid date")
				)
			if day in seen:
				continue  # one date listed twice excludes it once
			seen.add(day)
			kept.append(row)
		if len(kept) != len(self.dates):
			self.set("dates", kept)
		self.holiday_list = (self.holiday_list or "").strip() or None
		if self.holiday_list:
			if not calendars.holiday_lists_installed():
				frappe.throw(
					_(
						"Holiday List {0}: this site has no Holiday List DocType (it comes with ERPNext or HRMS); "
						"clear the field"
					).format(self.holiday_list)
				)
			if not frappe.db.exists("Holiday List", self.holiday_list):
				frappe.throw(_("Holiday List {0} does not exist").format(self.holiday_list))

	def on_update(self):
		calendars.announce_users_of(self.name)

	def on_trash(self):
		users = frappe.get_all(
			"BTU Task Schedule", filters={"calendar": self.name}, pluck="name", order_by="name", limit=20
		)
		if users:
			frappe.throw(
				_(
					"BTU Calendar {0} is used by the schedules {1}: set another calendar on them (or clear it) first"
				).format(self.name, ", ".join(users)),
				frappe.LinkExistsError,
				title=_("Calendar in use"),
			)


def holiday_list_changed(doc, method=None):
	"""doc_events hook of ERPNext/HRMS's Holiday List: its calendars' schedules are compiled again."""
	for calendar in frappe.get_all("BTU Calendar", filters={"holiday_list": doc.name}, pluck="name"):
		frappe.get_doc("BTU Calendar", calendar).save(ignore_permissions=True)
