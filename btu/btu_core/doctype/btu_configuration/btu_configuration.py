"""BTU Configuration: site-wide defaults, retention, notifications and the scheduler panel."""

from __future__ import annotations

import frappe
from frappe import _
from frappe.model.document import Document
from frappe.utils import cint

from btu.shared.schedule import ScheduleError, parse_zone
from btu.btu_core import scheduled_jobs
from btu.btu_core.messages import input_error


class BTUConfiguration(Document):
	# begin: auto-generated types
	# This code is auto-generated. Do not modify anything in this block.

	from typing import TYPE_CHECKING

	if TYPE_CHECKING:
		from btu.btu_core.doctype.btu_email_recipient.btu_email_recipient import BTUEmailRecipient
		from frappe.types import DF

		default_catch_up_policy: DF.Literal["fire_once", "skip", "fire_all"]
		default_catch_up_window: DF.Int
		default_overlap_policy: DF.Literal["allow", "skip"]
		default_time_zone: DF.Data | None
		email_recipients: DF.Table[BTUEmailRecipient]
		enabled: DF.Check
		environment_name: DF.Data | None
		fire_frappe_jobs: DF.Check
		log_retention_days: DF.Int
	# end: auto-generated types
	def validate_higher_perm_levels(self):
		# Frappe resets a permlevel field its user may not write to the stored value here, before validate and
		# silently; and a save with ignore_permissions skips that. A change of the switch is refused on both paths.
		self.refuse_switch_change()
		super().validate_higher_perm_levels()

	def refuse_switch_change(self):
		"""Only a System Manager may switch who fires Frappe's own jobs (backups, email, ERPNext's): a mistake
		there stops them for the whole site."""
		stored = cint(frappe.db.get_single_value("BTU Configuration", scheduled_jobs.SWITCH))
		if cint(self.get(scheduled_jobs.SWITCH)) == stored or "System Manager" in frappe.get_roles():
			return
		frappe.throw(
			_("{0} ({1}) can only be changed by a System Manager; {2} is not one. Ask a System Manager to change it.").format(
				_(self.meta.get_label(scheduled_jobs.SWITCH)), scheduled_jobs.SWITCH, frappe.session.user
			),
			frappe.PermissionError,
			title=_("Not permitted"),
		)

	def on_update(self):
		if self.has_value_changed("fire_frappe_jobs"):
			# The scheduler takes the Scheduled Job Types (or hands them back) now, not at its next full reconcile.
			scheduled_jobs.announce_all()

	def validate(self):
		if self.default_time_zone:
			try:
				parse_zone(self.default_time_zone)
			except ScheduleError as exc:
				frappe.throw(input_error(exc, field="default_time_zone"), title=_("Invalid default time zone"))
