"""BTU Task: a Python function path, its JSON keyword arguments, queue and time limit."""

from __future__ import annotations

import frappe
from frappe import _

from btu.btu_core.alerts import recipients
from btu.btu_core.alerts.validation import validate_rules
from btu.btu_core.field_bounds import BoundedDocument
from btu.btu_core.insights.metrics import forget_task
from btu.btu_core.runs import chains
from btu.btu_core.runs.task_inputs import (
	TaskInputError,
	check_arguments_fit,
	check_queue,
	parse_arguments,
	resolve_function,
)
from btu.btu_core.scheduler_link import announce_after_commit
from btu.btu_core.schedules import declared_schedules
from btu.btu_core.schedules.hook_entries import TASK_FIELDS
from btu.btu_core.sealed.document import SealedDocument
from btu.btu_core.setup.roles import require_system_manager_for
from btu.shared import protocol
from btu.shared.keys import MAX_CONCURRENT_RUNS
from btu.shared.run_requests import MAX_ATTEMPTS, MAX_CHAINED_TASKS, RETRY_ON


class BTUTask(SealedDocument, BoundedDocument):
	# Frappe's exporter writes this block with its imports sorted as text; isort would reorder them.
	# isort: off
	# begin: auto-generated types
	# This code is auto-generated. Do not modify anything in this block.

	from typing import TYPE_CHECKING

	if TYPE_CHECKING:
		from btu.btu_core.doctype.btu_alert_rule.btu_alert_rule import BTUAlertRule
		from btu.btu_core.doctype.btu_chained_task.btu_chained_task import BTUChainedTask
		from btu.btu_core.doctype.btu_email_recipient.btu_email_recipient import BTUEmailRecipient
		from frappe.types import DF

		alert_rules: DF.Table[BTUAlertRule]
		arguments: DF.Code | None
		chained_tasks: DF.Table[BTUChainedTask]
		declared_by_app: DF.Data | None
		declared_key: DF.Data | None
		desc_long: DF.SmallText | None
		desc_short: DF.Data
		email_recipients: DF.Table[BTUEmailRecipient]
		function_string: DF.Data
		last_runtime: DF.Datetime | None
		mail_run_output: DF.Check
		max_attempts: DF.Int
		max_concurrent_runs: DF.Int
		max_task_duration: DF.Int
		queue_name: DF.Data
		repeat_log_in_stdout: DF.Check
		retry_backoff_factor: DF.Float
		retry_delay_secs: DF.Int
		retry_max_delay_secs: DF.Int
		retry_on: DF.Literal["Any Failure", "Timeout", "Retry Signal"]
		run_only_as_worker: DF.Check
		task_group: DF.Data | None
		task_type: DF.Literal["Persistent", "One-Shot", "Subtask", "Other"]

	# end: auto-generated types
	# isort: on
	def onload(self):
		declared_schedules.form_hint(self, TASK_FIELDS)

	def before_insert(self):
		if not self.email_recipients:
			for row in frappe.get_single("BTU Configuration").email_recipients:
				self.append("email_recipients", {field: row.get(field) for field in RECIPIENT_FIELDS})

	def validate(self):
		declared_schedules.check_save(self, TASK_FIELDS)
		require_system_manager_for(self, CODE_FIELDS)
		require_system_manager_for(self, OUTPUT_FIELDS, _("it sends each run's output to the Task's email recipients"))
		validate_rules(self)
		recipients.require_system_manager_for_outsiders(self)
		try:
			arguments = parse_arguments(self.arguments, "arguments")
			function = resolve_function(self.function_string)
			# Schedules may add the missing ones through argument_overrides.
			check_arguments_fit(function, self.function_string, arguments, complete=False)
			check_queue(self.queue_name, "queue_name")
		except TaskInputError as exc:
			frappe.throw(str(exc), title=_("BTU Task {0}: invalid input").format(self.name or ""))
		validate_retries(self, _("BTU Task {0}: invalid input").format(self.name or ""))
		self.validate_chain()
		if not 0 <= (self.max_concurrent_runs or 0) <= MAX_CONCURRENT_RUNS:
			frappe.throw(
				_("Max Concurrent Runs {0}: give a whole number from 0 (no limit) to {1}").format(
					self.max_concurrent_runs, MAX_CONCURRENT_RUNS
				),
				title=_("BTU Task {0}: invalid input").format(self.name or ""),
			)

	def validate_chain(self):
		"""Refuse a chained task that is missing, more than MAX_CHAINED_TASKS rows, or a chain that leads back to this
		Task."""
		if len(self.chained_tasks or []) > MAX_CHAINED_TASKS:
			frappe.throw(
				_(
					"Chained Tasks: {0} rows, more than {1}; chain fewer tasks here (one of them can start the others)"
				).format(len(self.chained_tasks), MAX_CHAINED_TASKS),
				title=_("BTU Task {0}: invalid input").format(self.name or ""),
			)
		for row in self.chained_tasks or []:
			if row.next_task and not frappe.db.exists("BTU Task", row.next_task) and row.next_task != self.name:
				frappe.throw(
					_("Chained Tasks row {0}: no BTU Task named {1}; pick an existing task").format(
						row.idx, row.next_task
					)
				)
			if (row.delay_secs or 0) < 0:
				frappe.throw(
					_("Chained Tasks row {0}: Delay {1}: give 0 or more seconds").format(row.idx, row.delay_secs)
				)
		links = {row.next_task for row in self.chained_tasks or [] if row.next_task}
		if not links:
			return  # a Task that starts none is on no cycle
		# Held until this save commits: a concurrent save closing a cycle with this one waits, then sees these links.
		chains.lock_chains()
		edges = chains.chain_edges()
		edges[self.name] = links
		cycle = chains.chain_cycle(self.name, edges)
		if cycle:
			frappe.throw(
				_(
					"Chained Tasks: {0} leads back to {1}, so each run would start the next forever; remove one link "
					"of the cycle"
				).format(" -> ".join(cycle), self.name),
				title=_("BTU Task {0}: chain cycle").format(self.name or ""),
			)

	def on_update(self):
		# The scheduler reads the limit with each schedule row: its full refresh would find the change within a
		# minute; telling it about the first schedules applies the limit to them at once.
		if self.has_value_changed("max_concurrent_runs"):
			schedules = frappe.get_all(
				"BTU Task Schedule",
				filters={"task": self.name, "enabled": 1},
				pluck="name",
				order_by="name",
				limit=ANNOUNCED_SCHEDULES,
			)
			for schedule in schedules:
				announce_after_commit(protocol.CREATE_TASK_SCHEDULE, schedule)

	def on_trash(self):
		declared_schedules.check_delete(self)
		super().on_trash()
		forget_task(self.name)


def validate_retries(doc, title: str) -> None:
	"""The retry settings of a Task or a Schedule within their bounds (a Schedule's 0 or blank: the Task's)."""
	if not 0 <= (doc.max_attempts or 0) <= MAX_ATTEMPTS:
		frappe.throw(
			_("Max Attempts {0}: give a whole number from 1 (no retries) to {1}").format(
				doc.max_attempts, MAX_ATTEMPTS
			),
			title=title,
		)
	for field in ("retry_delay_secs", "retry_max_delay_secs"):
		if (doc.get(field) or 0) < 0:
			frappe.throw(
				_("{0} {1}: give 0 or more seconds").format(doc.meta.get_label(field), doc.get(field)), title=title
			)
	factor = doc.retry_backoff_factor or 0
	if factor and not 1 <= factor <= 10:
		frappe.throw(
			_("Backoff Factor {0}: give a number from 1 (the same delay each time) to 10").format(factor), title=title
		)
	if doc.retry_on and doc.retry_on not in RETRY_ON:
		frappe.throw(_("Retry On {0}: pick one of {1}").format(doc.retry_on, ", ".join(RETRY_ON)), title=title)


# What runs and with what: System Manager only (also permlevel 1 in btu_task.json).
CODE_FIELDS = ("function_string", "arguments")
# Whether run mails carry the return value, traceback and output: System Manager only (also permlevel 1 in
# btu_task.json).
OUTPUT_FIELDS = ("mail_run_output",)
# Schedules told of a changed concurrency limit on save; each is one RPC of up to 5 s when the scheduler is down.
ANNOUNCED_SCHEDULES = 10
RECIPIENT_FIELDS = ("email_address", "email_on_start", "email_on_success", "email_on_error", "email_on_timeout")
