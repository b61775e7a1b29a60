"""Alerts and pause on failure.

A rule (a BTU Alert Rule row) on a Task watches all its runs; one on a Schedule, that schedule's. It says
which event to tell whom: by email (Frappe's Email Queue), by a Desk notification (a Notification Log of
type Alert, for its users and the users of its role), by a webhook (a signed JSON POST from a job on the short
queue, to public addresses only, within WEBHOOK_TIMEOUT_SECS in all: btu.shared.webhooks). An event opens one BTU Alert Incident per (rule, scope) and
sends one message; repeats while it is open are counted on it, not sent; the end of the problem resolves
it and sends one recovery message. Nothing here raises into a run or a check: a delivery that fails is
written on its incident, any other error to the "btu" log. A webhook's failure says only "delivery failed" where a
BTU Manager reads it (the incident, a test alert's reply): its reason (refused, connection refused, timed out) would
tell which internal ports answer. The reason goes to the Error Log, which System Managers read.

The task runner calls `run_started` (late start) and `run_finished` (failure, consecutive failures,
recovery, pause on failure). `check` runs every minute from Frappe's scheduler (hooks.py) for what no run
reports: missed fires, stuck runs, no scheduler alive.
"""

from __future__ import annotations

import json
import re
import time
from datetime import datetime, timedelta
from functools import partial

import frappe
from frappe import _
from frappe.utils import cint, get_url_to_form, validate_email_address
from redis.exceptions import RedisError

from btu.shared import liveness, protocol
from btu.shared.instants import format_utc_iso
from btu.btu_core import scheduler_link
from btu.btu_core.instants import from_system_naive, to_system_naive, utc_now
from btu.btu_core.roles import is_system_manager, require_system_manager_for_rows

INCIDENT = "BTU Alert Incident"
RULE = "BTU Alert Rule"
TASK = "BTU Task"
SCHEDULE = "BTU Task Schedule"
FAILED = ("Failed", "Timed Out")
# A rule's threshold 0 means these (runs for Consecutive Failures, seconds for the rest).
DEFAULT_THRESHOLD = {"Consecutive Failures": 3, "Missed Fire": 300, "Late Start": 60, "Stuck Run": 0, "Scheduler Down": 300}
# The whole POST, from the lookup to the answer's status line.
WEBHOOK_TIMEOUT_SECS = 5
# Site config (site_config.json over common_site_config.json): hosts a webhook may post to though they resolve to
# internal addresses, such as a chat server on the LAN.
WEBHOOK_ALLOWED_HOSTS_KEY = "btu_webhook_allowed_hosts"
WEBHOOK_JOB = "btu.btu_core.alerts.post_webhook"
# How far back the missed-fire check looks, and how many (rule, schedule) pairs or Started Logs one check reads.
MISSED_LOOKBACK_SECS = 6 * 3600
MAX_CHECKED = 500
MAX_ROLE_USERS = 100
DELIVERY_ERRORS_CHARS = 10_000
# frappe.cache: when a scheduler was last seen alive (or, never seen, when the check first found none).
ALIVE_KEY = "btu_alerts_scheduler_seen_at"
# frappe.cache: where in the (rule, schedule) pairs the next missed-fire check starts.
MISSED_CURSOR_KEY = "btu_alerts_missed_cursor"
# Missed Fire rules listed per check (their pairs are names only; MAX_CHECKED of them are checked).
MAX_MISSED_RULES = 10_000
# Test messages (test_alert) a user may send in TEST_WINDOW_SECS: of one rule, of all rules (frappe.cache, counted
# under TEST_COUNT_KEY:<user>[:<rule>], each count expiring with its window).
TESTS_PER_RULE = 3
TESTS_PER_USER = 10
TEST_WINDOW_SECS = 60
TEST_COUNT_KEY = "btu_test_alerts"
RULE_FIELDS = "name, parent, parenttype, event, threshold, notify_recovery, by_email, by_bell, recipients, role, webhook_url"


def threshold(rule) -> int:
	return cint(rule.threshold) or DEFAULT_THRESHOLD.get(rule.event, 0)


def utc_of(system_naive) -> datetime:
	"""A Frappe Datetime value (the system zone's wall clock) as an aware instant."""
	return from_system_naive(frappe.utils.get_datetime(system_naive))


# -- validation ---------------------------------------------------------------------


def check_webhook_url(url: str) -> str | None:
	"""Why `url` cannot be a webhook (not http(s) with a host, or resolving to an internal address), or None. A host
	that does not resolve now is accepted: every POST checks again, and DNS down at save must not block the save."""
	from btu.shared import webhooks

	try:
		webhooks.addresses(webhooks.target(url), webhook_allowed_hosts(), time.monotonic() + WEBHOOK_TIMEOUT_SECS)
	except webhooks.WebhookRefused as exc:
		return webhook_error(exc)
	except webhooks.DeliveryFailed:
		return None
	return None


def webhook_error(exc) -> str:
	"""A btu.shared.webhooks error, translated (its template is marked for extraction there)."""
	return _(exc.template).format(**{key: protocol.mask_url(str(value)) for key, value in exc.params.items()})


def webhook_allowed_hosts() -> list[str]:
	"""The site config's btu_webhook_allowed_hosts: a list of host names, or text with commas."""
	hosts = frappe.conf.get(WEBHOOK_ALLOWED_HOSTS_KEY) or []
	return [host for host in (hosts.split(",") if isinstance(hosts, str) else hosts) if isinstance(host, str) and host.strip()]


def validate_rules(doc) -> None:
	"""A Task's or Schedule's alert rules: webhooks set by a System Manager only, each to a public http(s) URL and
	with a secret to sign its posts."""
	# A webhook makes this host send requests where it points: not a choice for a Desk role (SSRF).
	from btu.shared.webhooks import SIGNATURE_HEADER

	require_system_manager_for_rows(doc, "alert_rules", ("webhook_url", "webhook_secret"))
	for row in doc.get("alert_rules") or []:
		row.webhook_url = (row.webhook_url or "").strip() or None
		problem = row.webhook_url and check_webhook_url(row.webhook_url)
		if problem:
			frappe.throw(_("Alert rule {0}: {1}").format(row.idx, problem), title=_("Invalid webhook"))
		if row.webhook_url and not row.webhook_secret:
			frappe.throw(
				_("Alert rule {0}: a webhook needs a Webhook Secret; set one and give it to the receiver, which checks the {1} header with it").format(
					row.idx, SIGNATURE_HEADER
				),
				title=_("Invalid webhook"),
			)
		unknown = [name for name in recipient_names(row) if not validate_email_address(name) and not frappe.db.exists("User", name)]
		if unknown:
			frappe.throw(
				_("Alert rule {0}: {1} is neither an email address nor a user").format(row.idx, ", ".join(unknown)), title=_("Invalid recipients")
			)


# -- rules and incidents --------------------------------------------------------------


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
		f"select {RULE_FIELDS} from `tabBTU Alert Rule` where event = %s and parenttype in ('BTU Task', 'BTU Task Schedule') "
		"order by parenttype, parent, idx limit %s",
		(event, limit),
		as_dict=True,
	)


def watched(task, schedule=None) -> bool:
	"""Whether the Task or its Schedule has alert rules: their `alert_rules` rows, as loaded with them (a run reads them
	only when it started with some)."""
	return bool(task.get("alert_rules") or (schedule is not None and schedule.get("alert_rules")))


def own_scope(rule) -> str | None:
	"""The schedule an incident of `rule` is about: a Schedule's rule, its own; a Task's rule watches the whole Task (None)."""
	return rule.parent if rule.parenttype == SCHEDULE else None


def open_incident(rule, task: str, schedule: str | None, message: str, key: str, log: str | None = None) -> str | None:
	"""Open `rule`'s incident for `schedule` and send its message; one already open counts the occurrence
	(once per `key`) instead. Returns the incident opened, None when one was open."""
	lock(rule)
	open_one = frappe.db.get_value(INCIDENT, incident_filters(rule, schedule), ["name", "last_key", "occurrences"], as_dict=True, for_update=True)
	if open_one:
		if open_one.last_key != key:
			frappe.db.set_value(
				INCIDENT, open_one.name,
				{"occurrences": cint(open_one.occurrences) + 1, "last_key": key, "last_message": message, "log": log},
			)
		return None
	incident = frappe.get_doc(
		{
			"doctype": INCIDENT, "status": "Open", "kind": rule.event, "task": task, "schedule": schedule,
			"rule": rule.name, "rule_parenttype": rule.parenttype, "rule_parent": rule.parent,
			"opened_at": to_system_naive(utc_now()), "occurrences": 1, "last_key": key, "last_message": message, "log": log,
		}
	).insert(ignore_permissions=True)
	deliver(rule, incident, "opened")
	return incident.name


def resolve(rule, schedule: str | None, resolution: str) -> list[str]:
	"""Resolve `rule`'s open incident for `schedule`, with its recovery message if the rule asks for one."""
	lock(rule)
	names = frappe.db.get_values(INCIDENT, incident_filters(rule, schedule), "name", pluck=True, for_update=True)
	for name in names:
		incident = close(name, resolution)
		if incident and cint(rule.notify_recovery):
			deliver(rule, incident, "resolved")
	return names


def lock(rule) -> None:
	"""Serialise `rule`'s incidents: two workers failing at once open one, and a success resolves what a failure
	committed just before. The reads after it lock too: under REPEATABLE READ a plain read sees the snapshot of
	the transaction's first read, from before the other worker committed."""
	frappe.db.sql("select name from `tabBTU Alert Rule` where name = %s for update", rule.name)


def close(name: str, resolution: str):
	"""Mark an incident Resolved; None if it was not open any more."""
	incident = frappe.get_doc(INCIDENT, name, for_update=True)
	if incident.status != "Open":
		return None
	incident.update({"status": "Resolved", "resolved_at": to_system_naive(utc_now()), "resolution": resolution})
	incident.save(ignore_permissions=True)
	return incident


def incident_filters(rule, schedule: str | None) -> dict:
	return {"rule": rule.name, "status": "Open", "schedule": schedule or ("is", "not set")}


def resolve_by_hand(incident: str, note: str | None = None) -> dict:
	"""Resolve an incident without a recovery message: the problem may not be over, and its next occurrence alerts again."""
	resolution = _("Resolved by {0}").format(frappe.session.user) + (f": {note}" if note else "")
	closed = close(incident, resolution)
	frappe.db.commit()
	return {"incident": incident, "resolved": closed is not None, "resolution": resolution if closed else None}


# -- delivery ---------------------------------------------------------------------------


def payload(incident, event: str) -> dict:
	"""The webhook's JSON body (and what mail and notifications say)."""
	return {
		"event": event,
		"incident": incident.name,
		"kind": incident.kind,
		"status": incident.status,
		"site": frappe.local.site,
		"task": incident.task,
		"schedule": incident.schedule,
		"log": incident.log,
		"occurrences": cint(incident.occurrences),
		"opened_at": format_utc_iso(utc_of(incident.opened_at)) if incident.opened_at else None,
		"resolved_at": format_utc_iso(utc_of(incident.resolved_at)) if incident.resolved_at else None,
		"message": incident.resolution if event == "resolved" else incident.last_message,
		"url": get_url_to_form(INCIDENT, incident.name),
	}


def deliver(rule, incident, event: str) -> None:
	for error in send(rule, payload(incident, event), (INCIDENT, incident.name)):
		note_delivery_error(incident.name, error)


def send(rule, body: dict, reference: tuple[str, str], *, webhook_now: bool = False) -> list[str]:
	"""Send `body` on `rule`'s channels; returns what failed. The webhook is queued (after commit) unless `webhook_now`."""
	subject, text = render(body)
	emails, users = audience(rule)
	errors = []
	if cint(rule.by_email) and emails:
		try:
			frappe.sendmail(recipients=emails, subject=subject, message=text, reference_doctype=reference[0], reference_name=reference[1], now=False)
		except Exception as exc:
			errors.append(_("email to {0}: {1}: {2}").format(", ".join(emails), type(exc).__name__, exc))
	for user in users if cint(rule.by_bell) else []:
		try:
			frappe.get_doc(
				{
					"doctype": "Notification Log", "for_user": user, "type": "Alert", "subject": subject,
					"email_content": text, "document_type": reference[0], "document_name": reference[1],
				}
			).insert(ignore_permissions=True)
		except Exception as exc:
			errors.append(_("Desk notification to {0}: {1}: {2}").format(user, type(exc).__name__, exc))
	if rule.webhook_url and webhook_now:
		error = post(rule.name, body)
		errors += [error if is_system_manager() else delivery_failed()] if error else []
	elif rule.webhook_url:
		frappe.db.after_commit.add(partial(queue_webhook, rule.name, body, reference[1]))
	return errors


def render(body: dict) -> tuple[str, str]:
	environment = frappe.db.get_single_value("BTU Configuration", "environment_name")
	prefix = f"[{environment}] " if environment else ""
	heading = {"opened": _("BTU alert"), "resolved": _("BTU resolved"), "test": _("BTU test alert")}[body["event"]]
	where = " ".join(filter(None, [body.get("task"), f"({body['schedule']})" if body.get("schedule") else None]))
	subject = f"{prefix}{heading}: {_(body['kind'])} {where}".strip()
	escape = frappe.utils.escape_html
	link = f"<p><a href=\"{escape(body['url'])}\">{escape(body['incident'])}</a></p>" if body.get("incident") else ""
	text = escape(body.get("message") or "") + link
	return subject, text


def audience(rule) -> tuple[list[str], list[str]]:
	"""(email addresses, Desk users) of a rule: its recipients, and the enabled users holding its role."""
	names = recipient_names(rule)
	users = [name for name in names if frappe.db.exists("User", {"name": name, "enabled": 1})]
	if rule.role:
		holders = frappe.get_all("Has Role", filters={"role": rule.role, "parenttype": "User"}, pluck="parent", limit=MAX_ROLE_USERS)
		if holders:
			users += frappe.get_all("User", filters=[["name", "in", holders], ["name", "!=", "Guest"], ["enabled", "=", 1]], pluck="name")
	emails = [name for name in names if validate_email_address(name)]
	emails += [email for email in (frappe.db.get_value("User", user, "email") for user in users) if email]
	return list(dict.fromkeys(emails)), list(dict.fromkeys(users))


def recipient_names(rule) -> list[str]:
	return [part.strip() for part in re.split(r"[,;\s]+", rule.recipients or "") if part.strip()]


def queue_webhook(rule: str, body: dict, incident: str) -> None:
	"""After the incident commits: the POST as a short-queue job naming the rule (its URL and secret stay out of the
	job's arguments, which the RQ Job list shows); a queue that refuses it is noted on the incident."""
	try:
		frappe.enqueue(WEBHOOK_JOB, queue="short", timeout=WEBHOOK_TIMEOUT_SECS * 4, rule=rule, body=body, incident=incident)
	except Exception as exc:
		frappe.log_error(title="BTU webhook not queued", reference_doctype=RULE, reference_name=rule, message=_("alert rule {0}: {1}: {2}").format(rule, type(exc).__name__, exc))
		note_delivery_error(incident, delivery_failed())
		frappe.db.commit()


def post_webhook(rule: str, body: dict, incident: str | None = None) -> None:
	"""The webhook job: one POST; a failure is noted on the incident, never raised (RQ would retry nothing anyway)."""
	if post(rule, body) and incident:
		note_delivery_error(incident, delivery_failed())
		frappe.db.commit()


def delivery_failed() -> str:
	"""What a webhook's failure says where a BTU Manager reads it."""
	return _("webhook delivery failed (a System Manager finds the reason in the Error Log)")


def post(rule: str, body: dict) -> str | None:
	"""POST `body` as signed JSON to alert rule `rule`'s webhook; None, or why it failed (also in the Error Log)."""
	# Imported here, not with this module: every run's end imports alerts; only a webhook's POST needs them
	# (the password module brings passlib and cryptography, tens of ms in every work-horse).
	from frappe.utils.password import get_decrypted_password

	from btu.shared import webhooks

	url = frappe.db.get_value(RULE, rule, "webhook_url")
	if not url:
		return None  # the rule, or its webhook, was removed after the alert was queued
	secret = get_decrypted_password(RULE, rule, "webhook_secret", raise_exception=False)
	problem = None
	if not secret:
		problem = _("it has no Webhook Secret to sign its posts; a System Manager sets one on the alert rule")
	else:
		try:
			code = webhooks.post(url, json.dumps(body).encode(), secret=secret, allowed_hosts=webhook_allowed_hosts(), timeout_secs=WEBHOOK_TIMEOUT_SECS)
			problem = None if 200 <= code < 300 else _("HTTP {0}").format(code)
		except webhooks.WebhookError as exc:
			problem = webhook_error(exc)
	if problem is None:
		return None
	reason = _("webhook {0} of alert rule {1}: {2}").format(protocol.mask_url(url), rule, problem)
	frappe.log_error(title="BTU webhook delivery failed", message=reason, reference_doctype=RULE, reference_name=rule)
	return reason


def note_delivery_error(incident: str, error: str) -> None:
	frappe.logger("btu").warning(f"site={frappe.local.site} incident={incident} delivery failed: {error}")
	before = frappe.db.get_value(INCIDENT, incident, "delivery_errors") or ""
	line = f"{format_utc_iso(utc_now())} {error}"
	frappe.db.set_value(INCIDENT, incident, "delivery_errors", (before + "\n" + line).strip()[-DELIVERY_ERRORS_CHARS:], update_modified=False)


def take_test_turn(rule, parent) -> None:
	"""Count a test of `rule` by the session's user; past TESTS_PER_RULE of the rule or TESTS_PER_USER in all within
	TEST_WINDOW_SECS, raise frappe.RateLimitExceededError. A test sends at once and outside the one message an
	incident sends: unbounded, it would make the site's mail server a Desk user's relay."""
	user = frappe.session.user
	cache = frappe.cache()
	for scope, limit, sent in (
		(f"{user}:{rule.name}", TESTS_PER_RULE, _("{0} tests of this rule").format(TESTS_PER_RULE)),
		(user, TESTS_PER_USER, _("{0} tests of alert rules").format(TESTS_PER_USER)),
	):
		key = cache.make_key(f"{TEST_COUNT_KEY}:{scope}")
		# One transaction: the window's expiry is set with its first count, so a count never outlives it.
		pipe = cache.pipeline()
		pipe.set(key, 0, ex=TEST_WINDOW_SECS, nx=True)
		pipe.incr(key)
		if pipe.execute()[1] > limit:
			frappe.throw(
				_("Alert rule {0} of {1} {2}: user {3} sent {4} in the last {5} s, the most allowed; wait a minute, then test again").format(
					rule.idx, _(parent.doctype), parent.name, user, sent, TEST_WINDOW_SECS
				),
				frappe.RateLimitExceededError,
				title=_("Too many test alerts"),
			)


def test_fire(rule, parent) -> dict:
	"""Send a test message on `rule`'s channels now (the webhook too, in this request); no incident is made."""
	body = {
		"event": "test", "incident": None, "kind": rule.event, "status": "Test", "site": frappe.local.site,
		"task": parent.name if parent.doctype == TASK else parent.task, "schedule": parent.name if parent.doctype == SCHEDULE else None,
		"log": None, "occurrences": 0, "opened_at": format_utc_iso(utc_now()), "resolved_at": None,
		"message": _("A test of alert rule {0} of {1} {2}, sent by {3}.").format(rule.idx, _(parent.doctype), parent.name, frappe.session.user),
		"url": get_url_to_form(parent.doctype, parent.name),
	}
	errors = send(rule, body, (parent.doctype, parent.name), webhook_now=True)
	frappe.db.commit()
	emails, users = audience(rule)
	return {
		"emails": emails if cint(rule.by_email) else [],
		"users": users if cint(rule.by_bell) else [],
		"webhook": (protocol.mask_url(rule.webhook_url) if is_system_manager() else _("the rule's webhook")) if rule.webhook_url else None,
		"errors": errors,
	}


# -- run events -------------------------------------------------------------------------


def guarded(function, *args) -> None:
	"""Run one alert step in its own transaction; an error is logged and rolled back, never raised."""
	try:
		function(*args)
		frappe.db.commit()
	except Exception:
		frappe.db.rollback()
		frappe.logger("btu").exception(f"site={frappe.local.site} alerts: {function.__name__} failed")


def run_started(log, task, schedule, start_lag_secs: float | None) -> None:
	"""Late start: a scheduled run whose function was called more than a rule's threshold after its fire time (slot +
	jitter; a retry's or backfill's request: its run_at). Told after the call: nothing here may delay the run."""
	if schedule is not None and start_lag_secs is not None and log.slot_utc and watched(task, schedule):
		guarded(late_start, log, task, schedule, start_lag_secs)


def late_start(log, task, schedule, lag: float) -> None:
	for rule in rules_for(("Late Start",), task.name, schedule.name):
		scope = own_scope(rule)
		if lag > threshold(rule):
			message = _("Run {0} of {1} slot {2} started {3:.1f} s after its fire time (threshold {4} s).").format(
				log.name, schedule.name, log.slot_utc, lag, threshold(rule)
			)
			open_incident(rule, task.name, scope, message, key=log.name, log=log.name)
		else:
			resolve(rule, scope, _("Run {0} started {1:.1f} s after its fire time.").format(log.name, lag))


def run_finished(log, task, schedule=None, *, final: bool = True) -> None:
	"""A run's end: failure, consecutive failures and recovery alerts, and pause on failure. Never raises.

	`final`: no retry follows this run. A failure that will be retried (final=False) neither counts toward
	a streak nor alerts; only its last attempt does.
	"""
	if log.status == "Succeeded" and not watched(task, schedule) and not (schedule is not None and cint(schedule.get("failure_streak"))):
		return  # no incident to resolve, no streak to end: not a statement more after every successful run
	if log.status == "Succeeded" or (log.status in FAILED and final):
		guarded(finished, log, task, schedule)


def finished(log, task, schedule) -> None:
	failed = log.status in FAILED
	streak = bump_streak(schedule.name, failed) if schedule else 0
	rules = rules_for(("Failure", "Consecutive Failures"), task.name, schedule.name if schedule else None) if watched(task, schedule) else []
	for rule in rules:
		scope = own_scope(rule)
		if not failed:
			resolve(rule, scope, _("Run {0} succeeded.").format(log.name))
			continue
		count = streak if rule.parenttype == SCHEDULE else task_streak(task.name, threshold(rule))
		if rule.event == "Failure" or count >= threshold(rule):
			# What the run raised goes out by mail only where the Task's mail_run_output (a System Manager's) says so.
			outcome = (log.result_message or "")[:500] if cint(task.get("mail_run_output")) else _("see its Log")
			message = _("Run {0} of {1} {2}: {3}").format(log.name, task.name, _(log.status).lower(), outcome)
			if rule.event == "Consecutive Failures":
				message = _("{0} failed runs in a row. {1}").format(count, message)
			open_incident(rule, task.name, scope, message, key=log.name, log=log.name)
	limit = cint(schedule.get("pause_after_failures")) if schedule else 0
	if failed and limit and streak >= limit:
		pause_for_failures(schedule, task, streak, log)


def bump_streak(schedule: str, failed: bool) -> int:
	"""The schedule's failed runs in a row, this one counted (a success ends it)."""
	if not failed:
		frappe.db.sql("update `tabBTU Task Schedule` set failure_streak = 0 where name = %s and failure_streak != 0", schedule)
		return 0
	frappe.db.sql("update `tabBTU Task Schedule` set failure_streak = failure_streak + 1 where name = %s", schedule)
	# Plain SQL: frappe.db.get_value would load Frappe's query engine in the work-horse, after every scheduled run.
	rows = frappe.db.sql(f"select failure_streak from `tab{SCHEDULE}` where name = %s", schedule)
	return cint(rows[0][0]) if rows else 0


def task_streak(task: str, up_to: int) -> int:
	"""The Task's newest finished runs that failed in a row, counted up to `up_to`."""
	statuses = frappe.get_all(
		# An attempt that was retried is not a run's end: only its last attempt counts.
		"BTU Task Log", filters={"task": task, "status": ("in", ("Succeeded", *FAILED)), "retried": 0}, pluck="status", order_by="creation desc", limit=up_to
	)
	return next((i for i, status in enumerate(statuses) if status not in FAILED), len(statuses))


def pause_for_failures(schedule, task, streak: int, log) -> None:
	"""Pause the schedule (the scheduler is told after commit, as for a pause from the Desk) and raise its Paused alerts."""
	if cint(frappe.db.get_value(SCHEDULE, schedule.name, "paused")):
		return
	note = _("Paused by BTU at {0} UTC after {1} failed runs in a row (pause_after_failures), the last {2}. Resuming clears the count.").format(
		format_utc_iso(utc_now()), streak, log.name
	)
	frappe.db.set_value(SCHEDULE, schedule.name, {"paused": 1, "pause_note": note})
	if cint(schedule.enabled):
		scheduler_link.announce_after_commit(protocol.CREATE_TASK_SCHEDULE, schedule.name)
	frappe.logger("btu").warning(f"site={frappe.local.site} schedule={schedule.name} paused after {streak} failures (log={log.name})")
	for rule in rules_for(("Paused",), task.name, schedule.name):
		open_incident(rule, task.name, schedule.name, note, key=log.name, log=log.name)


def before_schedule_save(doc) -> None:
	"""Keep the streak the runs counted (the form's copy may be stale); resuming clears it."""
	before = doc.get_doc_before_save()
	resumed = before is not None and before.paused and not doc.paused
	doc.failure_streak = 0 if resumed or doc.is_new() else cint(frappe.db.get_value(SCHEDULE, doc.name, "failure_streak"))


def after_schedule_save(doc) -> None:
	"""A resumed schedule's Paused incidents resolve."""
	before = doc.get_doc_before_save()
	if before is not None and before.paused and not doc.paused:
		for rule in rules_for(("Paused",), doc.task, doc.name):
			resolve(rule, doc.name, _("Resumed by {0}.").format(frappe.session.user))


# -- periodic checks --------------------------------------------------------------------


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
	from btu.shared.schedule import ScheduleError

	pairs = []
	for rule in all_rules("Missed Fire", limit=MAX_MISSED_RULES):
		watched = {"name": rule.parent} if rule.parenttype == SCHEDULE else {"task": rule.parent}
		pairs += [(rule, name) for name in frappe.get_all(SCHEDULE, filters={**watched, "enabled": 1, "paused": 0}, pluck="name", order_by="name")]
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
	from btu.btu_core.preview import spec_of
	from btu.shared.alert_slots import overdue_slots

	since = max(now - timedelta(seconds=MISSED_LOOKBACK_SECS), utc_of(schedule.modified))
	resolved = frappe.get_all(
		INCIDENT, filters={"rule": rule.name, "schedule": schedule.name, "status": "Resolved"}, pluck="resolved_at", order_by="resolved_at desc", limit=1
	)
	if resolved and resolved[0]:
		since = max(since, utc_of(resolved[0]))
	if cint(schedule.run_limit) and frappe.db.count("BTU Task Log", {"schedule": schedule.name}) >= cint(schedule.run_limit):
		return
	slots = [format_utc_iso(slot) for slot in overdue_slots(spec_of(schedule), since, now, threshold(rule))]
	if not slots:
		return
	logged = set(frappe.get_all("BTU Task Log", filters={"schedule": schedule.name, "slot_utc": ("in", slots)}, pluck="slot_utc"))
	missing = [slot for slot in slots if slot not in logged]
	newest_ran = slots[-1] in logged
	# A miss the newest slot ran after still opens an incident (then resolved at once), unless one is open: that one ends now.
	if missing and not (newest_ran and frappe.db.exists(INCIDENT, incident_filters(rule, schedule.name))):
		message = _("{0} slot(s) of {1} have no Task Log {2} s after their fire time: {3}").format(
			len(missing), schedule.name, threshold(rule), ", ".join(missing[-5:])
		)
		open_incident(rule, schedule.task, schedule.name, message, key=missing[-1])
	if newest_ran:
		resolve(rule, schedule.name, _("Slot {0} of {1} ran.").format(slots[-1], schedule.name))


def check_stuck(now: datetime) -> None:
	"""Runs still Started past their Task's time limit (max_task_duration, else the queue's timeout) plus the threshold."""
	from btu.btu_core.task_runner import max_duration

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
			row for row in started
			if row.task == task and (scope is None or row.schedule == scope) and row.date_time_started
			and frappe.utils.get_datetime(row.date_time_started) <= now_system - timedelta(seconds=max_duration(row) + limit)
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
		return liveness.leader(scheduler_link.queue_redis()) is not None
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
			message = _("No BTU scheduler has held the leader lease for {0} s (bench btu-scheduler run; btu-scheduler status).").format(round(down_secs))
			open_incident(rule, task, own_scope(rule), message, key="down")
