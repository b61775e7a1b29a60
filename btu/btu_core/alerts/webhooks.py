"""An alert rule's webhook: its URL checked (public http(s) only, unless the site config allows the host), and one
signed JSON POST within WEBHOOK_TIMEOUT_SECS in all (`webhook_post`).

A webhook's failure says only "delivery failed" where a BTU Manager reads it (the incident, a test alert's reply):
its reason (refused, connection refused, timed out) would tell which internal ports answer. The reason goes to the
Error Log, which System Managers read.
"""

from __future__ import annotations

import json
import time

import frappe
from frappe import _

from btu.btu_core.alerts.rules import RULE
from btu.shared.redis_urls import mask_url

# The whole POST, from the lookup to the answer's status line.
WEBHOOK_TIMEOUT_SECS = 5
# Site config (site_config.json over common_site_config.json): hosts a webhook may post to though they resolve to
# internal addresses, such as a chat server on the LAN.
WEBHOOK_ALLOWED_HOSTS_KEY = "btu_webhook_allowed_hosts"


def check_webhook_url(url: str) -> str | None:
	"""Why `url` cannot be a webhook (not http(s) with a host, or resolving to an internal address), or None. A host
	that does not resolve now is accepted: every POST checks again, and DNS down at save must not block the save."""
	# Imported here, not with this module: every run's end imports alerts (delivery), only a save checks a URL.
	from btu.btu_core.alerts import webhook_post

	try:
		webhook_post.addresses(
			webhook_post.target(url), webhook_allowed_hosts(), time.monotonic() + WEBHOOK_TIMEOUT_SECS
		)
	except webhook_post.WebhookRefused as exc:
		return webhook_error(exc)
	except webhook_post.DeliveryFailed:
		return None
	return None


def webhook_error(exc) -> str:
	"""A `webhook_post` error, translated (its template is marked for extraction there)."""
	return _(exc.template).format(**{key: mask_url(str(value)) for key, value in exc.params.items()})


def webhook_allowed_hosts() -> list[str]:
	"""The site config's btu_webhook_allowed_hosts: a list of host names, or text with commas."""
	hosts = frappe.conf.get(WEBHOOK_ALLOWED_HOSTS_KEY) or []
	return [
		host
		for host in (hosts.split(",") if isinstance(hosts, str) else hosts)
		if isinstance(host, str) and host.strip()
	]


def post(rule: str, body: dict) -> str | None:
	"""POST `body` as signed JSON to alert rule `rule`'s webhook; None, or why it failed (also in the Error Log)."""
	# Imported here, not with this module: every run's end imports alerts; only a webhook's POST needs them
	# (the password module brings passlib and cryptography, tens of ms in every work-horse).
	from frappe.utils.password import get_decrypted_password

	from btu.btu_core.alerts import webhook_post

	url = frappe.db.get_value(RULE, rule, "webhook_url")
	if not url:
		return None  # the rule, or its webhook, was removed after the alert was queued
	secret = get_decrypted_password(RULE, rule, "webhook_secret", raise_exception=False)
	problem = None
	if not secret:
		problem = _("it has no Webhook Secret to sign its posts; a System Manager sets one on the alert rule")
	else:
		try:
			code = webhook_post.post(
				url,
				json.dumps(body).encode(),
				secret=secret,
				allowed_hosts=webhook_allowed_hosts(),
				timeout_secs=WEBHOOK_TIMEOUT_SECS,
			)
			problem = None if 200 <= code < 300 else _("HTTP {0}").format(code)
		except webhook_post.WebhookError as exc:
			problem = webhook_error(exc)
	if problem is None:
		return None
	reason = _("webhook {0} of alert rule {1}: {2}").format(mask_url(url), rule, problem)
	frappe.log_error(title="BTU webhook delivery failed", message=reason, reference_doctype=RULE, reference_name=rule)
	return reason


def delivery_failed() -> str:
	"""What a webhook's failure says where a BTU Manager reads it."""
	return _("webhook delivery failed (a System Manager finds the reason in the Error Log)")
