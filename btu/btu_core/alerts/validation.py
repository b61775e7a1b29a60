"""A Task's or Schedule's alert rules checked on save: webhooks a System Manager's only (SSRF), each to a public
http(s) URL and with a secret to sign its posts; recipients an address or a user."""

from __future__ import annotations

import frappe
from frappe import _
from frappe.utils import validate_email_address

from btu.btu_core.alerts.recipients import recipient_names
from btu.btu_core.alerts.webhook_post import SIGNATURE_HEADER
from btu.btu_core.alerts.webhooks import check_webhook_url
from btu.btu_core.setup.roles import require_system_manager_for_rows


def validate_rules(doc) -> None:
	"""A Task's or Schedule's alert rules: webhooks set by a System Manager only, each to a public http(s) URL and
	with a secret to sign its posts."""
	# A webhook makes this host send requests where it points: not a choice for a Desk role (SSRF).
	require_system_manager_for_rows(doc, "alert_rules", ("webhook_url", "webhook_secret"))
	for row in doc.get("alert_rules") or []:
		row.webhook_url = (row.webhook_url or "").strip() or None
		problem = row.webhook_url and check_webhook_url(row.webhook_url)
		if problem:
			frappe.throw(_("Alert rule {0}: {1}").format(row.idx, problem), title=_("Invalid webhook"))
		if row.webhook_url and not row.webhook_secret:
			frappe.throw(
				_(
					"Alert rule {0}: a webhook needs a Webhook Secret; set one and give it to the receiver, which "
					"checks the {1} header with it"
				).format(row.idx, SIGNATURE_HEADER),
				title=_("Invalid webhook"),
			)
		unknown = [
			name
			for name in recipient_names(row)
			if not validate_email_address(name) and not frappe.db.exists("User", name)
		]
		if unknown:
			frappe.throw(
				_("Alert rule {0}: {1} is neither an email address nor a user").format(row.idx, ", ".join(unknown)),
				title=_("Invalid recipients"),
			)
