"""BTU's whitelisted methods, callable from the Desk and over REST (/api/method/btu.btu_core.api.<name>).

Every method checks roles first (System Manager or BTU Manager). The parameters' annotations are real types, not
strings (no `from __future__ import annotations` in a module that whitelists): Frappe's whitelist checks each argument
against them and skips string ones, and a name sent as a number or an object would reach SQL (MariaDB finds
'TS-000001' equal to 0.0).
"""

import frappe
from frappe import _
from frappe.utils import cint
from frappe.utils.background_jobs import get_redis_conn

from btu.btu_core import field_bounds, scheduler_link
from btu.btu_core.alerts import delivery, incidents
from btu.btu_core.instants import to_system_naive, to_utc, utc_now
from btu.btu_core.messages import input_error
from btu.btu_core.runs import backfills, run_requests
from btu.btu_core.runs.task_run import run_in_this_process
from btu.btu_core.runs.time_limit import max_duration
from btu.btu_core.schedules import declared_schedules, skipped_slots
from btu.btu_core.schedules.preview import next_fires as schedule_next_fires
from btu.btu_core.setup.roles import require_btu_manager
from btu.btu_core.upgrade import notes, undeclared
from btu.shared import liveness, old_daemon, protocol, task_args
from btu.shared.instants import format_utc_iso, parse_utc_iso
from btu.shared.keys import MAX_CONCURRENT_RUNS, NAMESPACE_SETTING
from btu.shared.schedule import ScheduleError

RUN_ON = ("worker", "webserver")
RUN_REQUEST = "BTU Run Request"


def _reply(reply: protocol.Reply) -> dict:
	return {
		"outcome": reply.outcome,
		"message": scheduler_link.describe(reply),
		"round_trip_ms": round(reply.round_trip_ms, 1),
	}


def age_secs(moment) -> float | None:
	"""Seconds since `moment`: epoch seconds or milliseconds, or an ISO 8601 instant."""
	if moment in (None, ""):
		return None
	try:
		if isinstance(moment, (int, float)):
			seconds = moment / 1000 if moment > 1e11 else moment
			return round(utc_now().timestamp() - seconds, 1)
		return round((utc_now() - parse_utc_iso(str(moment), "heartbeat_at")).total_seconds(), 1)
	except ValueError:
		return None


@frappe.whitelist()
def ping() -> dict:
	"""Ping the BTU scheduler through Redis; outcome ok, error, unreachable or denied (Redis refused the bench's
	user)."""
	require_btu_manager()
	return _reply(scheduler_link.send(protocol.PING))


@frappe.whitelist()
def status() -> dict:
	"""The scheduler's status: the leader and processes live (their heartbeats), this site's part as last published."""
	require_btu_manager()
	published = scheduler_link.read_status()
	site = frappe.local.site
	leader = published.get("leader") or {}
	heartbeat_age = age_secs(leader.get("heartbeat_at"))
	sharing = liveness.benches_sharing(published.get("processes") or [])
	return {
		"shared_redis": sharing,
		"shared_redis_message": sharing_message(sharing) if sharing else None,
		"site": site,
		"checked_at": format_utc_iso(utc_now()),
		"updated_at": published.get("updated_at"),
		"leader": leader,
		"heartbeat_age_secs": heartbeat_age,
		"processes": published.get("processes") or [],
		"this_site": (published.get("sites") or {}).get(site) or {},
		"error": published.get("error"),
		"error_outcome": published.get("outcome"),
		"original_btu": "; ".join(
			filter(
				None,
				(
					old_daemon.report(get_redis_conn(), utc_now().timestamp()),
					old_daemon.socket_report(original_socket()),
				),
			)
		)
		or None,
		"published": bool(published) and not published.get("error"),
		"declared_skipped": declared_schedules.skipped(),
	}


def sharing_message(benches: list[dict]) -> str:
	"""`liveness.sharing_message`, translated."""
	names = "; ".join(
		_("{0} (bench_id {1}, on {2})").format(bench["path"], bench["id"], ", ".join(bench["hosts"]))
		for bench in benches
	)
	return _(
		"{0} benches run BTU schedulers on this Redis under the same key names: {1}. They share one leader lease, so "
		"only the leader's bench fires, and it takes the other bench's sites for gone. Give each bench its own {2} in "
		"its common_site_config.json (for example its bench id) and restart its schedulers and workers."
	).format(len(benches), names, NAMESPACE_SETTING)


@frappe.whitelist(methods=["POST"])
def run_task_now(task: str, on: str = "worker", schedule: str | None = None) -> dict:
	"""Run a Task now: on="worker" enqueues it on its queue; on="webserver" runs it in this request."""
	require_btu_manager()
	if on not in RUN_ON:
		frappe.throw(_("on '{0}': must be one of {1}").format(on, ", ".join(RUN_ON)))
	doc = frappe.get_doc("BTU Task", task)
	doc.check_permission("read")
	if schedule:
		frappe.get_doc("BTU Task Schedule", schedule).check_permission("read")
	if on == "webserver":
		if doc.run_only_as_worker:
			frappe.throw(_("BTU Task {0} is marked Run Only as Worker; run it via a worker").format(task))
		log = run_in_this_process(task, schedule=schedule)
		return {"on": on, "log": log.name, "status": log.status, "execution_time": log.execution_time}
	queue = (frappe.db.get_value("BTU Task Schedule", schedule, "queue_name") if schedule else None) or doc.queue_name
	job = frappe.enqueue(
		"btu.btu_core.task_runner.run_enqueued_task",
		queue=queue,
		timeout=max_duration(doc),
		task=task,
		schedule=schedule,
		enqueued_at=format_utc_iso(utc_now(), milliseconds=True),
	)
	return {"on": on, "queue": queue, "job_id": job.id if job else None}


@frappe.whitelist(methods=["POST"])
def run_once_at(task: str, at: str) -> dict:
	"""Create an enabled one-off ("Once") schedule for `task` at `at`: ISO 8601 with an offset (2026-12-01T09:00:00Z),
	or a date and time in the system time zone (as the Desk's Datetime fields give it)."""
	require_btu_manager()
	frappe.get_doc("BTU Task", task).check_permission("read")
	schedule = frappe.get_doc(
		{
			"doctype": "BTU Task Schedule",
			"task": task,
			"enabled": 1,
			"run_frequency": "Once",
			# The column holds the system zone's wall clock: an instant with an offset is converted, not written as
			# text.
			"run_at": to_system_naive(instant(at, "at")),
			"time_zone": frappe.utils.get_system_timezone(),
		}
	)
	schedule.insert()
	return {"schedule": schedule.name, "description": schedule.schedule_description}


@frappe.whitelist(methods=["POST"])
def pause(schedule: str, note: str | None = None) -> dict:
	"""Pause a schedule: it stays with the scheduler but does not fire until resumed."""
	require_btu_manager()
	doc = frappe.get_doc("BTU Task Schedule", schedule)
	doc.paused = 1
	doc.pause_note = note or _("Paused by {0} at {1}").format(frappe.session.user, frappe.utils.now())
	doc.save()
	return {"schedule": doc.name, "paused": True, "pause_note": doc.pause_note}


@frappe.whitelist(methods=["POST"])
def resume(schedule: str) -> dict:
	"""Resume a paused schedule; slots passed while paused are not caught up."""
	require_btu_manager()
	doc = frappe.get_doc("BTU Task Schedule", schedule)
	doc.paused = 0
	doc.save()
	return {"schedule": doc.name, "paused": False}


@frappe.whitelist(methods=["POST"])
def skip_next_runs(schedule: str, count: int = 1) -> dict:
	"""Skip the schedule's next `count` runs (1 to 100; runs skipped already are not counted): they never fire."""
	require_btu_manager()
	doc = frappe.get_doc("BTU Task Schedule", schedule)
	doc.check_permission("write")
	skipped = skipped_slots.skip_next(doc, cint(count))
	return {"schedule": doc.name, "skipped": skipped, "skipped_slots": [row.slot_utc for row in doc.skipped_slots]}


@frappe.whitelist(methods=["POST"])
def unskip(schedule: str, slot: str) -> dict:
	"""Undo a skip: the run at `slot` (UTC, e.g. 2026-12-05T08:00:00Z) fires again."""
	require_btu_manager()
	doc = frappe.get_doc("BTU Task Schedule", schedule)
	doc.check_permission("write")
	restored = skipped_slots.unskip(doc, slot)
	return {"schedule": doc.name, "unskipped": restored, "skipped_slots": [row.slot_utc for row in doc.skipped_slots]}


@frappe.whitelist(methods=["POST"])
def set_max_concurrent_runs(task: str, limit: int) -> dict:
	"""At most `limit` (0: no limit, up to 100) jobs of the Task queued or started at once across its schedules;
	a scheduled fire that finds that many is skipped (skipped_concurrency). Run Now jobs are not counted."""
	require_btu_manager()
	doc = frappe.get_doc("BTU Task", task)
	doc.check_permission("write")
	try:
		doc.max_concurrent_runs = int(limit)
	except (TypeError, ValueError):
		frappe.throw(
			_("limit {0}: give a whole number from 0 (no limit) to {1}").format(repr(limit), MAX_CONCURRENT_RUNS)
		)
	doc.save()
	return {"task": doc.name, "max_concurrent_runs": doc.max_concurrent_runs}


@frappe.whitelist(methods=["POST"])
def set_retry_policy(
	doctype: str,
	name: str,
	max_attempts: int | None = None,
	retry_on: str | None = None,
	retry_delay_secs: int | None = None,
	retry_backoff_factor: float | None = None,
	retry_max_delay_secs: int | None = None,
) -> dict:
	"""Set a Task's retries, or a Schedule's override of them (0 or "": the Task's); arguments left out stay."""
	require_btu_manager()
	if doctype not in ("BTU Task", "BTU Task Schedule"):
		frappe.throw(_("doctype {0}: give BTU Task or BTU Task Schedule").format(repr(doctype)))
	doc = frappe.get_doc(doctype, name)
	doc.check_permission("write")
	given = {
		"max_attempts": max_attempts,
		"retry_on": retry_on,
		"retry_delay_secs": retry_delay_secs,
		"retry_backoff_factor": retry_backoff_factor,
		"retry_max_delay_secs": retry_max_delay_secs,
	}
	for field, value in given.items():
		if value is None:
			continue
		try:
			doc.set(
				field,
				value if field == "retry_on" else (float(value) if field == "retry_backoff_factor" else int(value)),
			)
		except (TypeError, ValueError):
			frappe.throw(_("{0} {1}: give a number").format(field, repr(value)))
	doc.save()
	return {field: doc.get(field) for field in ("name", *given)}


@frappe.whitelist(methods=["POST"])
def set_chained_tasks(task: str, chained: str | list) -> dict:
	"""Replace a Task's chained tasks: a list (or its JSON) of {"next_task", "on_outcome": Success|Failure|Any,
	"delay_secs"}. A chain leading back to the Task is refused."""
	require_btu_manager()
	doc = frappe.get_doc("BTU Task", task)
	doc.check_permission("write")
	try:
		rows = task_args.parse_json(chained, "chained") if isinstance(chained, str) else chained
	except task_args.ArgumentsError as exc:
		frappe.throw(input_error(exc))
	if not isinstance(rows, list) or not all(isinstance(row, dict) for row in rows):
		frappe.throw(_("chained: give a list of objects with next_task, on_outcome and delay_secs"))
	doc.set("chained_tasks", [])
	for row in rows:
		doc.append(
			"chained_tasks",
			{
				"next_task": row.get("next_task"),
				"on_outcome": row.get("on_outcome") or "Success",
				"delay_secs": cint(row.get("delay_secs")),
			},
		)
	doc.save()
	return {
		"task": doc.name,
		"chained_tasks": [
			{"next_task": r.next_task, "on_outcome": r.on_outcome, "delay_secs": r.delay_secs}
			for r in doc.chained_tasks
		],
	}


@frappe.whitelist(methods=["POST"])
def backfill(schedule: str, start: str, end: str, one_at_a_time: int = 1) -> dict:
	"""Run the schedule's slots from `start` to `end` (UTC ISO, e.g. 2026-11-01T00:00:00Z, or the system zone's
	date and time) that have no Task Log, each once: one at a time (the next after the one before ends) or, with
	one_at_a_time=0, all now. At most 1,000 slots; asking again adds nothing for slots already requested."""
	require_btu_manager()
	doc = frappe.get_doc("BTU Task Schedule", schedule)
	doc.check_permission("write")
	try:
		result = backfills.backfill(doc, instant(start, "start"), instant(end, "end"), bool(cint(one_at_a_time)))
	except ScheduleError as exc:
		frappe.throw(input_error(exc), title=_("{0}: invalid schedule").format(schedule))
	return {"schedule": doc.name, **result}


@frappe.whitelist(methods=["POST"])
def cancel_run_request(request: str) -> dict:
	"""Withdraw a Pending or Waiting run request (a retry or a backfilled slot, with the backfill's slots waiting on
	it)."""
	require_btu_manager()
	doc = frappe.get_doc(RUN_REQUEST, request)
	doc.check_permission("read")
	run_requests.cancel(doc)
	return {"request": doc.name, "status": frappe.db.get_value(RUN_REQUEST, doc.name, "status")}


@frappe.whitelist()
def pending_runs(schedule: str | None = None, task: str | None = None, limit: int = 50) -> list[dict]:
	"""Retries, backfilled slots and chained runs not run yet, soonest first."""
	require_btu_manager()
	filters = {"status": ("in", ("Pending", "Waiting"))}
	if schedule:
		filters["schedule"] = schedule
	if task:
		filters["task"] = task
	return frappe.get_list(
		RUN_REQUEST,
		filters=filters,
		fields=[
			"name",
			"status",
			"origin",
			"task",
			"schedule",
			"slot_utc",
			"attempt",
			"run_at_utc",
			"parent_log",
			"backfill",
		],
		order_by="run_at asc, slot_utc asc",
		limit=max(1, min(cint(limit) or 50, 500)),
	)


def instant(text: str, field: str):
	"""A UTC ISO instant, or a naive date and time in the system zone, as an aware UTC datetime, within the years
	every zone converts (field_bounds)."""
	try:
		moment = to_utc(str(text), field)
	except (ValueError, TypeError, OverflowError):
		moment = None
	if moment is None or not field_bounds.EARLIEST <= moment.replace(tzinfo=None) <= field_bounds.LATEST:
		frappe.throw(
			_(
				"{0} {1}: give a date and time from {2} to {3}, e.g. 2026-11-01T00:00:00Z (UTC) or 2026-11-01 00:00:00 "
				"(system zone)"
			).format(field, repr(str(text)[:60]), field_bounds.EARLIEST.year, field_bounds.LATEST.year)
		)
	return moment


@frappe.whitelist()
def next_fires(schedule: str, n: int = 10) -> dict:
	"""The next `n` fires of a saved schedule, in UTC, its zone and the user's zone."""
	require_btu_manager()
	doc = frappe.get_doc("BTU Task Schedule", schedule)
	doc.check_permission("read")
	try:
		return schedule_next_fires(doc, cint(n) or 10)
	except ScheduleError as exc:
		frappe.throw(input_error(exc), title=_("{0}: invalid schedule").format(schedule))


@frappe.whitelist(methods=["POST"])
def resync(schedule: str | None = None) -> dict:
	"""Tell the scheduler to reload one schedule, or every schedule of this site.

	Never changes a schedule: if the scheduler is unreachable it stops and
	says so (the scheduler reconciles from the database when it starts).
	"""
	require_btu_manager()
	names = [schedule] if schedule else frappe.get_all("BTU Task Schedule", pluck="name", order_by="name")
	sent = []
	for name in names:
		enabled = frappe.db.get_value("BTU Task Schedule", name, "enabled")
		if enabled is None:
			frappe.throw(_("schedule '{0}': no such BTU Task Schedule").format(name))
		request_type = protocol.CREATE_TASK_SCHEDULE if cint(enabled) else protocol.CANCEL_TASK_SCHEDULE
		reply = scheduler_link.send(request_type, name)
		sent.append({"schedule": name, "request_type": request_type, **_reply(reply)})
		if reply.outcome in ("unreachable", "denied"):
			break
	return {
		"requested": len(names),
		"sent": sent,
		"complete": len(sent) == len(names) and all(s["outcome"] == "ok" for s in sent),
	}


@frappe.whitelist()
def recent_runs(schedule: str | None = None, task: str | None = None, limit: int = 20) -> list[dict]:
	"""The newest Logs of a schedule or task."""
	require_btu_manager()
	filters = {}
	if schedule:
		filters["schedule"] = schedule
	if task:
		filters["task"] = task
	return frappe.get_list(
		"BTU Task Log",
		filters=filters,
		fields=["name", "status", "slot", "slot_utc", "date_time_started", "execution_time", "fire_lag_ms", "worker"],
		order_by="creation desc",
		limit=max(1, min(cint(limit) or 20, 200)),
	)


INCIDENT_FIELDS = [
	"name",
	"status",
	"kind",
	"task",
	"schedule",
	"opened_at",
	"resolved_at",
	"occurrences",
	"last_message",
	"log",
	"delivery_errors",
]


@frappe.whitelist()
def open_incidents(task: str | None = None, schedule: str | None = None, limit: int = 50) -> list[dict]:
	"""Open alert incidents, newest first, of a task or schedule or all."""
	require_btu_manager()
	filters = {"status": "Open"}
	if task:
		filters["task"] = task
	if schedule:
		filters["schedule"] = schedule
	return frappe.get_list(
		"BTU Alert Incident",
		filters=filters,
		fields=INCIDENT_FIELDS,
		order_by="opened_at desc",
		limit=max(1, min(cint(limit) or 50, 500)),
	)


@frappe.whitelist(methods=["POST"])
def resolve_incident(incident: str, note: str | None = None) -> dict:
	"""Resolve an open incident by hand (no recovery message); its problem happening again opens a new one."""
	require_btu_manager()
	frappe.get_doc("BTU Alert Incident", incident).check_permission("write")
	return incidents.resolve_by_hand(incident, note)


@frappe.whitelist(methods=["POST"])
def test_alert(doctype: str, name: str, rule: str) -> dict:
	"""Send a test message on one alert rule's channels now (a Task's or a Schedule's); returns who and what failed."""
	require_btu_manager()
	if doctype not in ("BTU Task", "BTU Task Schedule"):
		frappe.throw(_("doctype '{0}': alert rules are on a BTU Task or a BTU Task Schedule").format(doctype))
	parent = frappe.get_doc(doctype, name)
	parent.check_permission("read")
	row = next((row for row in parent.get("alert_rules") or [] if row.name == rule), None)
	if row is None:
		frappe.throw(_("{0} {1} has no alert rule {2}").format(_(doctype), name, rule))
	delivery.take_test_turn(row, parent)
	return delivery.test_fire(row, parent)


def original_socket() -> str | None:
	"""The original BTU Configuration's socket path, still in tabSingles after an upgrade (no field of BTU's)."""
	value = frappe.db.sql(
		"select value from tabSingles where doctype = 'BTU Configuration' and field = 'path_to_btu_scheduler_uds'"
	)
	return value[0][0] if value else None


@frappe.whitelist()
def upgrade_report() -> dict:
	"""What the upgrade from the original BTU left to do: values it kept unconverted, Tasks whose function no app
	declares."""
	require_btu_manager()
	return {"notes": notes.stored(), "undeclared": undeclared.undeclared()}
