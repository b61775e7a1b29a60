"""BTU Task: a Python function path, its JSON keyword arguments, queue and time limit."""

from __future__ import annotations

import frappe
from frappe.model.document import Document

from btu.btu_core.roles import require_system_manager_for
from btu.btu_core.task_inputs import TaskInputError, check_arguments_fit, check_queue, parse_arguments, resolve_function


class BTUTask(Document):
	def before_insert(self):
		if not self.email_recipients:
			for row in frappe.get_single("BTU Configuration").email_recipients:
				self.append("email_recipients", {field: row.get(field) for field in RECIPIENT_FIELDS})

	def validate(self):
		require_system_manager_for(self, CODE_FIELDS)
		try:
			arguments = parse_arguments(self.arguments, "arguments")
			function = resolve_function(self.function_string)
			# Schedules may add the missing ones through argument_overrides.
			check_arguments_fit(function, self.function_string, arguments, complete=False)
			check_queue(self.queue_name, "queue_name")
		except TaskInputError as exc:
			frappe.throw(str(exc), title=f"BTU Task {self.name or ''}: invalid input")


# What runs and with what: System Manager only (also permlevel 1 in btu_task.json).
CODE_FIELDS = ("function_string", "arguments")
RECIPIENT_FIELDS = ("email_address", "email_on_start", "email_on_success", "email_on_error", "email_on_timeout")
