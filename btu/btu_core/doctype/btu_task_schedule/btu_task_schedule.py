"""BTU Task Schedule: when a Task runs, in which zone, with which policies.

Validation goes through the same semantics the scheduler fires with
(btu.shared.schedule), so what the form accepts is what fires. The scheduler is
told about a change only after it commits (btu.btu_core.scheduler_link).
"""

import frappe
from frappe import _
from frappe.utils import cint

from btu.btu_core import field_bounds
from btu.btu_core.alerts import pause, recipients
from btu.btu_core.alerts.validation import validate_rules
from btu.btu_core.doctype.btu_task.btu_task import validate_retries
from btu.btu_core.field_bounds import BoundedDocument
from btu.btu_core.instants import with_offset_to_system_clock
from btu.btu_core.messages import input_error
from btu.btu_core.runs.task_inputs import (
	TaskInputError,
	check_arguments_fit,
	check_queue,
	merge_arguments,
	resolve_function,
)
from btu.btu_core.scheduler_link import announce_after_commit
from btu.btu_core.schedules import declared_schedules
from btu.btu_core.schedules.hook_entries import SCHEDULE_FIELDS
from btu.btu_core.schedules.preview import next_fires, render_html
from btu.btu_core.schedules.skipped_slots import tidy_skipped
from btu.btu_core.schedules.spec import spec_of
from btu.btu_core.sealed.document import SealedDocument
from btu.btu_core.setup.roles import require_btu_manager, require_system_manager_for
from btu.shared import protocol, task_args
from btu.shared.run_kind import RESERVED_STARTS, RunKey, RunKind
from btu.shared.schedule import ScheduleError
from btu.shared.schedule.frequency import HELPERS, frequency_to_cron

# Moments, not wall times of the schedule's zone: on the system zone's clock as every Frappe Datetime (row_instant).
MOMENT_FIELDS = ("run_at", "start_time", "end_time")


class BTUTaskSchedule(SealedDocument, BoundedDocument):
	# Frappe's exporter writes this block with its imports sorted as text; isort would reorder them.
	# isort: off
	# begin: auto-generated types
	# This code is auto-generated. Do not modify anything in this block.

	from typing import TYPE_CHECKING

	if TYPE_CHECKING:
		from btu.btu_core.doctype.btu_alert_rule.btu_alert_rule import BTUAlertRule
		from btu.btu_core.doctype.btu_email_recipient.btu_email_recipient import BTUEmailRecipient
		from btu.btu_core.doctype.btu_skipped_slot.btu_skipped_slot import BTUSkippedSlot
		from frappe.types import DF

		alert_rules: DF.Table[BTUAlertRule]
		argument_overrides: DF.Code | None
		calendar: DF.Link | None
		calendar_policy: DF.Literal["Skip excluded days", "Move to next working day"]
		catch_up_max: DF.Int
		catch_up_policy: DF.Literal["fire_once", "skip", "fire_all"]
		catch_up_window: DF.Int
		cron_string: DF.Data | None
		day_of_month: DF.Int
		day_of_week: DF.Literal["Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday", "Sunday"]
		declared_by_app: DF.Data | None
		declared_key: DF.Data | None
		declared_time_zone: DF.Data | None
		email_recipients: DF.Table[BTUEmailRecipient]
		enabled: DF.Check
		end_time: DF.Datetime | None
		every: DF.Int
		every_unit: DF.Literal["Seconds", "Minutes", "Hours", "Days"]
		failure_streak: DF.Int
		hour: DF.Int
		jitter_secs: DF.Int
		max_attempts: DF.Int
		minute: DF.Int
		month: DF.Literal[
			"January",
			"February",
			"March",
			"April",
			"May",
			"June",
			"July",
			"August",
			"September",
			"October",
			"November",
			"December",
		]
		overlap_policy: DF.Literal["allow", "skip"]
		pause_after_failures: DF.Int
		pause_note: DF.SmallText | None
		paused: DF.Check
		queue_name: DF.Data | None
		retry_backoff_factor: DF.Float
		retry_delay_secs: DF.Int
		retry_max_delay_secs: DF.Int
		retry_on: DF.Literal["", "Any Failure", "Timeout", "Retry Signal"]
		run_at: DF.Datetime | None
		run_frequency: DF.Literal["Hourly", "Daily", "Weekly", "Monthly", "Yearly", "Cron Style", "Interval", "Once"]
		run_limit: DF.Int
		schedule_description: DF.SmallText | None
		skipped_slots: DF.Table[BTUSkippedSlot]
		start_time: DF.Datetime | None
		task: DF.Link
		task_description: DF.Data | None
		time_zone: DF.Data | None

	# end: auto-generated types
	# isort: on
	def onload(self):
		declared_schedules.form_hint(self, SCHEDULE_FIELDS)

	def before_insert(self):
		# A declared schedule without a zone follows the site's System Settings zone ("site zone").
		if not self.time_zone and not self.declared_by_app:
			self.time_zone = frappe.db.get_single_value("BTU Configuration", "default_time_zone") or None

	def before_validate(self):
		for field in MOMENT_FIELDS:
			self.set(field, with_offset_to_system_clock(self.get(field)))
		if self.task:
			self.task_description = frappe.db.get_value("BTU Task", self.task, "desc_short")
		if not self.paused:
			self.pause_note = None
		pause.before_schedule_save(self)

	def validate(self):
		declared_schedules.check_save(self, SCHEDULE_FIELDS)
		# What the Task's function runs with: System Manager only (also permlevel 1 in btu_task_schedule.json).
		require_system_manager_for(self, ("argument_overrides",))
		validate_rules(self)
		recipients.require_system_manager_for_outsiders(self)
		if self.name and not RunKey(RunKind.SCHEDULE, self.name).reads_back():
			frappe.throw(
				_(
					"Name {0}: a schedule's name may not start with {1} or {2} (BTU names run requests and Scheduled "
					"Job Types so); rename it"
				).format(self.name, *RESERVED_STARTS)
			)
		validate_retries(self, _("Invalid schedule"))
		try:
			if self.run_frequency in HELPERS:
				self.cron_string = self.helper_cron()
			dropped = tidy_skipped(self, spec_of(self, skipped=False))
			spec = spec_of(self)
		except ScheduleError as exc:
			frappe.throw(input_error(exc), title=_("Invalid schedule"))
		if dropped:
			frappe.msgprint(
				_("Removed skipped runs that are no runs of this schedule (its timing changed?): {0}").format(
					", ".join(dropped)
				),
				title=_("Skipped runs"),
				indicator="orange",
			)
		self.schedule_description = spec.describe()
		try:
			if self.queue_name:
				check_queue(self.queue_name, "queue_name (override)")
			if self.task:
				task = frappe.get_cached_doc("BTU Task", self.task)
				arguments = merge_arguments(task.arguments, self.argument_overrides)
				function = resolve_function(task.function_string)
				check_arguments_fit(function, task.function_string, arguments, complete=True)
		except TaskInputError as exc:
			frappe.throw(str(exc), title=_("Invalid schedule"))

	def on_update(self):
		pause.after_schedule_save(self)
		before = self.get_doc_before_save()
		# A migrate's sync need not wait for a scheduler that is down: one reads the rows when it starts.
		quiet = bool(self.flags.get(declared_schedules.FLAG))
		if self.enabled:
			announce_after_commit(protocol.CREATE_TASK_SCHEDULE, self.name, only_if_running=quiet)
		elif before is not None and before.enabled:
			announce_after_commit(protocol.CANCEL_TASK_SCHEDULE, self.name, only_if_running=quiet)

	def on_trash(self):
		declared_schedules.check_delete(self)
		super().on_trash()
		# A disabled schedule was cancelled when it was disabled.
		if self.enabled:
			announce_after_commit(protocol.CANCEL_TASK_SCHEDULE, self.name)

	@frappe.whitelist()
	def preview_next_fires(self, n: int = 10):
		"""The form's preview, from the values on screen (saved or not)."""
		require_btu_manager()
		field_bounds.check(self)  # the values on screen, not yet saved
		try:
			preview = next_fires(self, cint(n) or 10)
		except ScheduleError as exc:
			message = input_error(exc)
			return {"error": message, "html": f"<p class='text-danger'>{frappe.utils.escape_html(message)}</p>"}
		# A helper's cron, shown as the person changes the helper's fields, not only after the save that writes it.
		cron = self.helper_cron() if self.run_frequency in HELPERS else None
		return {**preview, "html": render_html(preview), "cron_string": cron}

	def helper_cron(self) -> str:
		return frequency_to_cron(
			self.run_frequency, self.minute, self.hour, self.day_of_week, self.day_of_month, self.month
		)


@frappe.whitelist()
def preview(doc: str | dict, n: int = 10) -> dict:
	"""The form's preview of the schedule on screen, saved or not, sent as an argument. The form calls this rather
	than preview_next_fires through frm.call, whose reply carries the document as sent: Frappe writes that copy over
	the form's and redraws every field from it, undoing what the person typed or saved while the preview was on its
	way."""
	require_btu_manager()
	try:
		values = task_args.parse_json(doc, "doc") if isinstance(doc, str) else doc
	except task_args.ArgumentsError as exc:
		frappe.throw(input_error(exc))
	if not isinstance(values, dict):
		frappe.throw(_("doc: give the BTU Task Schedule as a JSON object"))
	schedule = frappe.get_doc(values)
	if schedule.doctype != "BTU Task Schedule":
		frappe.throw(_("doc: give a BTU Task Schedule, not a {0}").format(_(schedule.doctype)))
	if not schedule.is_new():
		schedule.check_permission("read")
	return schedule.preview_next_fires(n)
