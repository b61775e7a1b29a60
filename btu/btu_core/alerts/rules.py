"""Alert rules (BTU Alert Rule rows on a Task or a Schedule): which rules watch a run, their thresholds, the scope
of their incidents."""

from __future__ import annotations

from datetime import datetime

import frappe
from frappe.utils import cint

from btu.btu_core.instants import from_system_naive

INCIDENT = "BTU Alert Incident"
RULE = "BTU Alert Rule"
TASK = "BTU Task"
SCHEDULE = "BTU Task Schedule"
FAILED = ("Failed", "Timed Out")
# A rule's threshold 0 means these (runs for Consecutive Failures, seconds for the rest).
DEFAULT_THRESHOLD = {
	"Consecutive Failures": 3,
	"Missed Fire": 300,
	"Late Start": 60,
	"Stuck Run": 0,
	"Scheduler Down": 300,
}
# How many (rule, schedule) pairs or Started Logs one check of the watchdog reads.
MAX_CHECKED = 500
RULE_FIELDS = (
	"name, parent, parenttype, event, threshold, notify_recovery, by_email, by_bell, recipients, role, webhook_url"
)


def threshold(rule) -> int:
	return cint(rule.threshold) or DEFAULT_THRESHOLD.get(rule.event, 0)


def utc_of(system_naive) -> datetime:
	"""A Frappe Datetime value (the system zone's wall clock) as an aware instant."""
	return from_system_naive(frappe.utils.get_datetime(system_naive))


def rules_for(events: tuple[str, ...], task: str, schedule: str | None = None) -> list:
	"""The rules for `events` on `task` and on `schedule`, the Task's first."""
	return frappe.db.sql(
		f"""select {RULE_FIELDS} from `tabBTU Alert Rule`
		where event in %(events)s and ((parenttype = 'BTU Task' and parent = %(task)s)
			or (parenttype = 'BTU Task Schedule' and parent = %(schedule)s))
		order by parenttype, idx""",
		{"events": events, "task": task, "schedule": schedule or ""},
		as_dict=True,
	)


def all_rules(event: str, limit: int = MAX_CHECKED) -> list:
	return frappe.db.sql(
		f"select {RULE_FIELDS} from `tabBTU Alert Rule` "
		"where event = %s and parenttype in ('BTU Task', 'BTU Task Schedule') "
		"order by parenttype, parent, idx limit %s",
		(event, limit),
		as_dict=True,
	)


def watched(task, schedule=None) -> bool:
	"""Whether the Task or its Schedule has alert rules: their `alert_rules` rows, as loaded with them (a run reads them
	only when it started with some)."""
	return bool(task.get("alert_rules") or (schedule is not None and schedule.get("alert_rules")))


def own_scope(rule) -> str | None:
	"""The schedule an incident of `rule` is about: a Schedule's rule, its own; a Task's rule watches the whole Task
	(None)."""
	return rule.parent if rule.parenttype == SCHEDULE else None
