"""Run notifications: mail to the Task's and the Schedule's recipients per their flags; the run's output only where
the Task's Run Output in Mail (mail_run_output) says so.

Mail goes through Frappe's email queue (Email Queue + its sender), never an
SMTP session inside the run; a mail that cannot be queued never fails the run.
"""

from __future__ import annotations

import frappe
from frappe import _
from frappe.utils import cint, escape_html, get_url_to_form

# Log status -> the recipient flag that asks for it.
FLAG_FOR_STATUS = {
	"Started": "email_on_start",
	"Succeeded": "email_on_success",
	"Failed": "email_on_error",
	"Timed Out": "email_on_timeout",
}
OUTPUT_EXCERPT_CHARS = 10_000


def recipients_for(status: str, *parents) -> list[str]:
	"""Addresses whose row (on any of the parents) has the flag for `status` set."""
	flag = FLAG_FOR_STATUS.get(status)
	if not flag:
		return []
	addresses: list[str] = []
	for parent in parents:
		for row in (parent.get("email_recipients") or []) if parent else []:
			address = (row.email_address or "").strip()
			if address and row.get(flag) and address not in addresses:
				addresses.append(address)
	return addresses


def notify(log, task, schedule=None) -> str | None:
	"""Queue the mail for the log's current status; returns a note when it could not."""
	addresses = recipients_for(log.status, task, schedule)
	if not addresses:
		return None
	environment = frappe.db.get_single_value("BTU Configuration", "environment_name")
	prefix = f"[{environment}] " if environment else ""
	subject = prefix + _("{0}: BTU Task {1}").format(_(log.status), task.desc_short)
	try:
		frappe.sendmail(
			recipients=addresses,
			subject=subject,
			message=_body(log, task, prefix),
			reference_doctype=log.doctype,
			reference_name=log.name,
			now=False,
		)
	except Exception as exc:
		return _("BTU: the {0} notification to {1} could not be queued: {2}: {3}").format(
			_(log.status), ", ".join(addresses), type(exc).__name__, exc
		)
	return None


def _body(log, task, prefix: str) -> str:
	rows = [
		(_("Status"), _(log.status)),
		(_("Task"), f"{task.name}: {task.desc_short}"),
		(_("Schedule"), log.schedule or _("(run now)")),
		(_("Slot (UTC)"), log.slot_utc or ""),
		(_("Started"), log.date_time_started or ""),
		(_("Ended"), log.date_time_ended or ""),
		(_("Duration (s)"), log.execution_time if log.execution_time is not None else ""),
		(_("Site"), log.site or ""),
	]
	table = "".join(f"<tr><th align='left'>{escape_html(k)}</th><td>{escape_html(str(v))}</td></tr>" for k, v in rows)
	heading = escape_html(prefix) + _("BTU Task Log")
	link = f"<a href='{get_url_to_form(log.doctype, log.name)}'>{log.name}</a>"
	parts = [f"<p>{heading} {link}</p>", f"<table>{table}</table>"]
	output = (
		(_("Return value"), log.result_message),
		(_("Traceback"), log.traceback),
		(_("Standard output"), log.stdout),
	)
	if cint(task.get("mail_run_output")):
		for label, text in output:
			if text:
				excerpt = (
					text
					if len(text) <= OUTPUT_EXCERPT_CHARS
					else text[:OUTPUT_EXCERPT_CHARS] + "\n" + _("[cut; see the log]")
				)
				parts.append(f"<h4>{label}</h4><pre>{escape_html(excerpt)}</pre>")
	elif any(text for _label, text in output):
		# Opt-in (a System Manager's, per Task): what a run printed or raised may hold data its recipients must not see.
		parts.append("<p>" + _("The return value, traceback and output are in the Log {0}.").format(link) + "</p>")
	if log.status == "Timed Out":
		stopped = _("The run exceeded the Task's max duration ({0} s) and was stopped.").format(task.max_task_duration)
		parts.append(f"<p>{stopped}</p>")
	return "\n".join(parts)
