"""An alert's message on its rule's channels: mail through Frappe's Email Queue, the Desk bell as Notification Logs
(for its users and the users of its role), the webhook as a job on the short queue. A delivery that fails is
written on its incident, never raised. Test alerts (a rule's test button) go out here too, rate-limited."""

from __future__ import annotations

from functools import partial

import frappe
from frappe import _
from frappe.utils import cint, get_url_to_form, validate_email_address

from btu.btu_core.alerts.recipients import recipient_names
from btu.btu_core.alerts.rules import INCIDENT, RULE, SCHEDULE, TASK, utc_of
from btu.btu_core.alerts.webhooks import WEBHOOK_TIMEOUT_SECS, delivery_failed, post
from btu.btu_core.instants import utc_now
from btu.btu_core.setup.roles import is_system_manager
from btu.shared.instants import format_utc_iso
from btu.shared.redis_urls import mask_url

# The webhook job's method, stored in each queued job: a move must leave the old path answering (alerts/__init__.py).
WEBHOOK_JOB = "btu.btu_core.alerts.delivery.post_webhook"
MAX_ROLE_USERS = 100
DELIVERY_ERRORS_CHARS = 10_000
# Test messages (test_alert) a user may send in TEST_WINDOW_SECS: of one rule, of all rules (frappe.cache, counted
# under TEST_COUNT_KEY:<user>[:<rule>], each count expiring with its window).
TESTS_PER_RULE = 3
TESTS_PER_USER = 10
TEST_WINDOW_SECS = 60
TEST_COUNT_KEY = "btu_test_alerts"


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
	"""Send `body` on `rule`'s channels; returns what failed. The webhook is queued (after commit) unless
	`webhook_now`."""
	return [error for _channel, error in send_on_channels(rule, body, reference, webhook_now=webhook_now)]


def send_on_channels(rule, body: dict, reference: tuple[str, str], *, webhook_now: bool = False) -> list[tuple]:
	"""`send`, each failure with its channel ("email", "bell", "webhook")."""
	subject, text = render(body)
	emails, users = audience(rule)
	errors = []
	if cint(rule.by_email) and emails:
		messages = getattr(frappe.local, "message_log", None)
		shown = len(messages) if messages is not None else 0
		try:
			frappe.sendmail(
				recipients=emails,
				subject=subject,
				message=text,
				reference_doctype=reference[0],
				reference_name=reference[1],
				now=False,
			)
		except Exception as exc:
			if messages is not None:  # Frappe's own message of this error ("Please setup default Email Account"):
				del messages[shown:]  # the error below says it, once, naming the recipients

			errors.append(("email", _("email to {0}: {1}: {2}").format(", ".join(emails), type(exc).__name__, exc)))
	for user in users if cint(rule.by_bell) else []:
		try:
			frappe.get_doc(
				{
					"doctype": "Notification Log",
					"for_user": user,
					"type": "Alert",
					"subject": subject,
					"email_content": text,
					"document_type": reference[0],
					"document_name": reference[1],
				}
			).insert(ignore_permissions=True)
		except Exception as exc:
			errors.append(("bell", _("Desk notification to {0}: {1}: {2}").format(user, type(exc).__name__, exc)))
	if rule.webhook_url and webhook_now:
		error = post(rule.name, body)
		errors += [("webhook", error if is_system_manager() else delivery_failed())] if error else []
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
	link = f'<p><a href="{escape(body["url"])}">{escape(body["incident"])}</a></p>' if body.get("incident") else ""
	text = escape(body.get("message") or "") + link
	return subject, text


def audience(rule) -> tuple[list[str], list[str]]:
	"""(email addresses, Desk users) of a rule: its recipients, and the enabled users holding its role."""
	names = recipient_names(rule)
	users = [name for name in names if frappe.db.exists("User", {"name": name, "enabled": 1})]
	if rule.role:
		holders = frappe.get_all(
			"Has Role", filters={"role": rule.role, "parenttype": "User"}, pluck="parent", limit=MAX_ROLE_USERS
		)
		if holders:
			users += frappe.get_all(
				"User", filters=[["name", "in", holders], ["name", "!=", "Guest"], ["enabled", "=", 1]], pluck="name"
			)
	emails = [name for name in names if validate_email_address(name)]
	emails += [email for email in (frappe.db.get_value("User", user, "email") for user in users) if email]
	return list(dict.fromkeys(emails)), list(dict.fromkeys(users))


def queue_webhook(rule: str, body: dict, incident: str) -> None:
	"""After the incident commits: the POST as a short-queue job naming the rule (its URL and secret stay out of the
	job's arguments, which the RQ Job list shows); a queue that refuses it is noted on the incident."""
	try:
		frappe.enqueue(
			WEBHOOK_JOB, queue="short", timeout=WEBHOOK_TIMEOUT_SECS * 4, rule=rule, body=body, incident=incident
		)
	except Exception as exc:
		frappe.log_error(
			title="BTU webhook not queued",
			reference_doctype=RULE,
			reference_name=rule,
			message=_("alert rule {0}: {1}: {2}").format(rule, type(exc).__name__, exc),
		)
		note_delivery_error(incident, delivery_failed())
		frappe.db.commit()


def post_webhook(rule: str, body: dict, incident: str | None = None) -> None:
	"""The webhook job: one POST; a failure is noted on the incident, never raised (RQ would retry nothing anyway)."""
	if post(rule, body) and incident:
		note_delivery_error(incident, delivery_failed())
		frappe.db.commit()


def note_delivery_error(incident: str, error: str) -> None:
	frappe.logger("btu").warning(f"site={frappe.local.site} incident={incident} delivery failed: {error}")
	before = frappe.db.get_value(INCIDENT, incident, "delivery_errors") or ""
	line = f"{format_utc_iso(utc_now())} {error}"
	frappe.db.set_value(
		INCIDENT,
		incident,
		"delivery_errors",
		(before + "\n" + line).strip()[-DELIVERY_ERRORS_CHARS:],
		update_modified=False,
	)


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
				_(
					"Alert rule {0} of {1} {2}: user {3} sent {4} in the last {5} s, the most allowed; wait a minute, "
					"then test again"
				).format(rule.idx, _(parent.doctype), parent.name, user, sent, TEST_WINDOW_SECS),
				frappe.RateLimitExceededError,
				title=_("Too many test alerts"),
			)


def test_fire(rule, parent) -> dict:
	"""Send a test message on `rule`'s channels now (the webhook too, in this request); no incident is made."""
	body = {
		"event": "test",
		"incident": None,
		"kind": rule.event,
		"status": "Test",
		"site": frappe.local.site,
		"task": parent.name if parent.doctype == TASK else parent.task,
		"schedule": parent.name if parent.doctype == SCHEDULE else None,
		"log": None,
		"occurrences": 0,
		"opened_at": format_utc_iso(utc_now()),
		"resolved_at": None,
		"message": _("A test of alert rule {0} of {1} {2}, sent by {3}.").format(
			rule.idx, _(parent.doctype), parent.name, frappe.session.user
		),
		"url": get_url_to_form(parent.doctype, parent.name),
	}
	failed = send_on_channels(rule, body, (parent.doctype, parent.name), webhook_now=True)
	frappe.db.commit()
	emails, users = audience(rule)
	# Whom it reached: an email that could not be queued (no outgoing Email Account) is among the errors, not here.
	emailed = cint(rule.by_email) and not any(channel == "email" for channel, _error in failed)
	errors = [error for _channel, error in failed]
	return {
		"emails": emails if emailed else [],
		"users": users if cint(rule.by_bell) else [],
		"webhook": (mask_url(rule.webhook_url) if is_system_manager() else _("the rule's webhook"))
		if rule.webhook_url
		else None,
		"errors": errors,
	}
