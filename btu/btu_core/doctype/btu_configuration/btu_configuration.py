"""BTU Configuration: site-wide defaults, retention, notifications and the scheduler panel."""

from __future__ import annotations

import frappe
from frappe import _
from frappe.utils import cast

from btu.btu_core.alerts import recipients
from btu.btu_core.field_bounds import BoundedDocument
from btu.btu_core.messages import input_error
from btu.btu_core.schedules import scheduled_job_types
from btu.shared.schedule import ScheduleError, parse_zone


class BTUConfiguration(BoundedDocument):
	# Frappe's exporter writes this block with its imports sorted as text; isort would reorder them.
	# isort: off
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
		upgrade_notes: DF.Code | None

	# end: auto-generated types
	# isort: on
	def validate_higher_perm_levels(self):
		# Frappe resets a permlevel field its user may not write to the stored value here, before validate and
		# silently; and a save with ignore_permissions skips that. A change of one of them is refused on both paths.
		self.refuse_system_manager_fields()
		super().validate_higher_perm_levels()

	def refuse_system_manager_fields(self):
		"""Only a System Manager may change SYSTEM_MANAGER_FIELDS."""
		if "System Manager" in frappe.get_roles():
			return
		for field in SYSTEM_MANAGER_FIELDS:
			# As the field's type (a REST body may send an Int as text), so an unchanged value is not a change.
			fieldtype = self.meta.get_field(field).fieldtype
			stored = frappe.db.get_single_value("BTU Configuration", field)
			if (cast(fieldtype, self.get(field)) or None) != (cast(fieldtype, stored) or None):
				frappe.throw(
					_(
						"{0} ({1}) can only be changed by a System Manager; {2} is not one. Ask a System Manager to "
						"change it."
					).format(_(self.meta.get_label(field)), field, frappe.session.user),
					frappe.PermissionError,
					title=_("Not permitted"),
				)

	def on_update(self):
		if self.has_value_changed("fire_frappe_jobs"):
			# The scheduler takes the Scheduled Job Types (or hands them back) now, not at its next full reconcile.
			scheduled_job_types.announce_all()

	def validate(self):
		recipients.require_system_manager_for_outsiders(self)
		if self.default_time_zone:
			try:
				parse_zone(self.default_time_zone)
			except ScheduleError as exc:
				frappe.throw(input_error(exc, field="default_time_zone"), title=_("Invalid default time zone"))


# A System Manager's (also permlevel 1 in btu_configuration.json): who fires Frappe's own jobs (backups, email,
# ERPNext's), a mistake there stops them for the whole site; the prefix of every BTU mail's subject, which must not
# be a BTU Manager's free text (a test alert sends at once to whom its rule names); and the log retention, since
# who shortens it deletes Logs and Run Requests, a System Manager's enqueued runs' among them, which a BTU Manager
# may neither read nor delete.
SYSTEM_MANAGER_FIELDS = (scheduled_job_types.SWITCH, "environment_name", "log_retention_days")
