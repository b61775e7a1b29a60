"""BTU Configuration: site-wide defaults, retention, notifications and the scheduler panel."""

from __future__ import annotations

import frappe
from frappe.model.document import Document

from btu.shared.schedule import ScheduleError, parse_zone


class BTUConfiguration(Document):
	def validate(self):
		if self.default_time_zone:
			try:
				parse_zone(self.default_time_zone)
			except ScheduleError as exc:
				frappe.throw(str(exc).replace("time_zone", "default_time_zone", 1), title="Invalid default time zone")
