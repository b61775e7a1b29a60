"""The watchdog: `check` runs every minute from Frappe's scheduler (hooks.py's scheduler_events) for what no run
reports: missed fires, stuck runs, no scheduler alive. It stays on Frappe's scheduler, not on BTU's: it must run
when no BTU scheduler does."""

from __future__ import annotations

from datetime import datetime, timedelta

import frappe
from frappe import _
from frappe.utils import cint
from redis.exceptions import RedisError

from btu.btu_core import scheduler_link
from btu.btu_core.alerts.incidents import guarded, incident_filters, open_incident, resolve
from btu.btu_core.alerts.overdue_slots import overdue_slots
from btu.btu_core.alerts.rules import INCIDENT, MAX_CHECKED, SCHEDULE, TASK, all_rules, own_scope, threshold, utc_of
from btu.btu_core.instants import to_system_naive, utc_now
from btu.btu_core.runs.time_limit import max_duration
from btu.btu_core.schedules.spec import spec_of
from btu.shared import liveness
from btu.shared.instants import format_utc_iso
from btu.shared.schedule import ScheduleError

# How far back the missed-fire check looks, and how many (rule, schedule) pairs or Started Logs one check reads.
MISSED_LOOKBACK_SECS = 6 * 3600
# Missed Fire rules listed per check (their pairs are names only; MAX_CHECKED of them are checked).
MAX_MISSED_RULES = 10_000
# frappe.cache: when a scheduler was last seen alive (or, never seen, when the check first found none).
ALIVE_KEY = "btu_alerts_scheduler_seen_at"
# frappe.cache: where in the (rule, schedule) pairs the next missed-fire check starts.
MISSED_CURSOR_KEY = "btu_alerts_missed_cursor"


def check() -> None:
	"""Every minute (Frappe's scheduler_events in hooks.py): missed fires, stuck runs, no scheduler alive; each part
	alone and bounded. Not a declared BTU schedule, unlike BTU's maintenance: it must run when no BTU scheduler does."""
	now = utc_now()
	for part in (check_missed, check_stuck, check_scheduler):
		guarded(part, now)


def check_missed(now: datetime) -> None:
	"""Slots of enabled, unpaused schedules with no Task Log `threshold` seconds after their fire time. At most
	MAX_CHECKED (rule, schedule) pairs a minute, from where the last check stopped: on a site with more, each
	pair's turn comes every few minutes instead of the same ones being checked every minute and the rest never."""
	pairs = []
	for rule in all_rules("Missed Fire", limit=MAX_MISSED_RULES):
		watched = {"name": rule.parent} if rule.parenttype == SCHEDULE else {"task": rule.parent}
		pairs += [
			(rule, name)
			for name in frappe.get_all(
				SCHEDULE, filters={**watched, "enabled": 1, "paused": 0}, pluck="name", order_by="name"
			)
		]
	if not pairs:
		return
	cache = frappe.cache()
	start = cint(cache.get_value(MISSED_CURSOR_KEY)) % len(pairs)
	turn = (pairs[start:] + pairs[:start])[:MAX_CHECKED]
	cache.set_value(MISSED_CURSOR_KEY, (start + len(turn)) % len(pairs))
	for rule, name in turn:
		try:
			missed_slots(rule, frappe.get_doc(SCHEDULE, name), now)
		except ScheduleError as exc:
			# The form refuses such a row; one saved before a rule changed must not stop the other checks.
			frappe.logger("btu").warning(f"site={frappe.local.site} schedule={name} missed-fire check skipped: {exc}")


def missed_slots(rule, schedule, now: datetime) -> None:
	since = max(now - timedelta(seconds=MISSED_LOOKBACK_SECS), utc_of(schedule.modified))
	resolved = frappe.get_all(
		INCIDENT,
		filters={"rule": rule.name, "schedule": schedule.name, "status": "Resolved"},
		pluck="resolved_at",
		order_by="resolved_at desc",
		limit=1,
	)
	if resolved and resolved[0]:
		since = max(since, utc_of(resolved[0]))
	if cint(schedule.run_limit) and frappe.db.count("BTU Task Log", {"schedule": schedule.name}) >= cint(
		schedule.run_limit
	):
		return
	slots = [format_utc_iso(slot) for slot in overdue_slots(spec_of(schedule), since, now, threshold(rule))]
	if not slots:
		return
	logged = set(
		frappe.get_all("BTU Task Log", filters={"schedule": schedule.name, "slot_utc": ("in", slots)}, pluck="slot_utc")
	)
	missing = [slot for slot in slots if slot not in logged]
	newest_ran = slots[-1] in logged
	# A miss the newest slot ran after still opens an incident (then resolved at once), unless one is open: that one
	# ends now.
	if missing and not (newest_ran and frappe.db.exists(INCIDENT, incident_filters(rule, schedule.name))):
		message = _("{0} slot(s) of {1} have no Task Log {2} s after their fire time: {3}").format(
			len(missing), schedule.name, threshold(rule), ", ".join(missing[-5:])
		)
		open_incident(rule, schedule.task, schedule.name, message, key=missing[-1])
	if newest_ran:
		resolve(rule, schedule.name, _("Slot {0} of {1} ran.").format(slots[-1], schedule.name))


def check_stuck(now: datetime) -> None:
	"""Runs still Started past their Task's time limit (max_task_duration, else the queue's timeout) plus the
	threshold."""
	rules = all_rules("Stuck Run")
	if not rules:
		return
	started = frappe.db.sql(
		"""select log.name, log.task, log.schedule, log.date_time_started, task.max_task_duration, task.queue_name
		from `tabBTU Task Log` log join `tabBTU Task` task on task.name = log.task
		where log.status = 'Started' order by log.date_time_started limit %s""",
		MAX_CHECKED,
		as_dict=True,
	)
	now_system = to_system_naive(now)
	for rule in rules:
		task = rule.parent if rule.parenttype == TASK else frappe.db.get_value(SCHEDULE, rule.parent, "task")
		scope = own_scope(rule)
		limit = threshold(rule)
		stuck = [
			row
			for row in started
			if row.task == task
			and (scope is None or row.schedule == scope)
			and row.date_time_started
			and frappe.utils.get_datetime(row.date_time_started)
			<= now_system - timedelta(seconds=max_duration(row) + limit)
		]
		if stuck:
			message = _("{0} run(s) of {1} still Started past the time limit ({2} s) + {3} s: {4}").format(
				len(stuck), task, max_duration(stuck[-1]), limit, ", ".join(row.name for row in stuck[-5:])
			)
			open_incident(rule, task, scope, message, key=stuck[-1].name, log=stuck[-1].name)
		else:
			resolve(rule, scope, _("No run of {0} is past its time limit.").format(task))


def scheduler_alive() -> bool:
	"""A scheduler holds the leader lease (it expires unless renewed): Redis unreachable counts as none."""
	try:
		return liveness.leader(scheduler_link.queue_redis(), scheduler_link.bench_keys()) is not None
	except RedisError:
		return False


def check_scheduler(now: datetime) -> None:
	"""No scheduler holding the lease for a rule's threshold seconds."""
	rules = all_rules("Scheduler Down")
	if not rules:
		return
	cache = frappe.cache()
	if scheduler_alive():
		cache.set_value(ALIVE_KEY, now.timestamp())
		for rule in rules:
			resolve(rule, own_scope(rule), _("A BTU scheduler holds the lease again."))
		return
	seen = cache.get_value(ALIVE_KEY)
	if seen is None:
		seen = now.timestamp()
		cache.set_value(ALIVE_KEY, seen)
	down_secs = now.timestamp() - float(seen)
	for rule in rules:
		if down_secs >= threshold(rule):
			task = rule.parent if rule.parenttype == TASK else frappe.db.get_value(SCHEDULE, rule.parent, "task")
			message = _(
				"No BTU scheduler has held the leader lease for {0} s (bench btu-scheduler run; btu-scheduler status)."
			).format(round(down_secs))
			open_incident(rule, task, own_scope(rule), message, key="down")
