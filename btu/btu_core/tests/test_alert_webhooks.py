"""Alert webhooks by role: only a System Manager sees or sets a rule's URL and secret; a failed delivery tells a BTU
Manager only that it failed (the reason is in the Error Log); internal addresses are refused on save; each post is
signed with the rule's secret and bounded by one deadline."""

import base64
import hashlib
import hmac
import socket
import threading
import time
from http.server import BaseHTTPRequestHandler, HTTPServer
from unittest import mock

import frappe
from frappe.desk.form.load import getdoc

import btu.btu_core.api as api
from btu.btu_core.alerts import webhooks
from btu.btu_core.alerts.webhook_post import SIGNATURE_HEADER
from btu.btu_core.tests.test_alerts import MANAGER, AlertCase, rule
from btu.btu_core.tests.webhook_servers import dribbling_server

SECRET = "rule-secret-of-the-test"


class Signed(BaseHTTPRequestHandler):
	"""Keeps each POST's signature header and raw body."""

	def do_POST(self):
		self.server.received.append(
			(self.headers.get(SIGNATURE_HEADER), self.rfile.read(int(self.headers["Content-Length"])))
		)
		self.send_response(204)
		self.end_headers()

	def log_message(self, *args):
		pass


class TestAlertWebhooks(AlertCase):
	def setUp(self):
		super().setUp()
		self.allow(["127.0.0.1"])

	def allow(self, hosts):
		allowed = mock.patch.dict(frappe.conf, {webhooks.WEBHOOK_ALLOWED_HOSTS_KEY: hosts})
		allowed.start()
		self.addCleanup(allowed.stop)

	def closed_port(self) -> int:
		with socket.socket() as probe:
			probe.bind(("127.0.0.1", 0))
			return probe.getsockname()[1]

	def webhook_task(self, url: str):
		return self.task([rule("Failure", by_email=0, by_bell=0, webhook_url=url, webhook_secret=SECRET)])

	def test_a_btu_manager_neither_reads_a_webhooks_url_or_secret_nor_clears_them_by_saving(self):
		url = f"http://127.0.0.1:{self.closed_port()}/hook?token=abc"
		task = self.webhook_task(url)
		frappe.set_user(MANAGER)
		getdoc("BTU Task", task.name)  # what the Desk's form loads
		[row] = frappe.response.docs[0].alert_rules
		self.assertFalse(row.get("webhook_url") or row.get("webhook_secret"), row)
		self.assertNotIn(url, frappe.as_json(frappe.client.get("BTU Task", task.name)))
		# Saving the form as loaded (no URL in it) keeps the System Manager's values.
		doc = frappe.get_doc(frappe.response.docs[0].as_dict())
		doc.desc_short = "edited by a BTU Manager"
		doc.save()
		frappe.set_user("Administrator")
		[saved] = frappe.get_doc("BTU Task", task.name).alert_rules
		self.assertEqual((saved.webhook_url, saved.get_password("webhook_secret")), (url, SECRET))

	def test_a_failed_delivery_tells_a_btu_manager_only_that_it_failed(self):
		closed = self.closed_port()
		task = self.webhook_task(f"http://127.0.0.1:{closed}/hook")
		frappe.set_user(MANAGER)
		reply = api.test_alert("BTU Task", task.name, task.alert_rules[0].name)
		self.assertEqual(reply["errors"], [webhooks.delivery_failed()])
		self.assertNotIn(str(closed), frappe.as_json(reply), "neither the port nor the URL reaches a BTU Manager")
		frappe.set_user("Administrator")
		reply = api.test_alert("BTU Task", task.name, task.alert_rules[0].name)
		self.assertIn(f"webhook http://127.0.0.1:{closed}/hook of alert rule", reply["errors"][0])
		self.assertIn("accepts a connection", reply["errors"][0])
		# Other processes of the site (a worker pulling mail) may log errors meanwhile: count only this port's.
		logged = frappe.get_all("Error Log", filters={"error": ["like", f"%127.0.0.1:{closed}%"]}, pluck="method")
		self.assertEqual(logged, ["BTU webhook delivery failed"] * 2)
		frappe.db.delete("Error Log", {"method": "BTU webhook delivery failed"})
		frappe.db.commit()

	def test_internal_addresses_are_refused_on_save_unless_listed_and_a_secret_is_required(self):
		self.allow([])
		task = self.task([rule("Failure", by_email=0, by_bell=0)])
		for url in (
			"http://169.254.169.254/latest/meta-data",
			"http://127.0.0.1:3306/",
			"http://[::1]:3306/",
			"http://0x7f000001:3306/",
		):
			doc = frappe.get_doc("BTU Task", task.name)
			doc.alert_rules[0].update({"webhook_url": url, "webhook_secret": SECRET})
			with (
				self.subTest(url=url),
				self.assertRaisesRegex(frappe.ValidationError, "resolves to .* btu_webhook_allowed_hosts"),
			):
				doc.save()
		self.allow(["127.0.0.1"])
		doc = frappe.get_doc("BTU Task", task.name)
		doc.alert_rules[0].webhook_url = "http://127.0.0.1:3306/"
		with self.assertRaisesRegex(frappe.ValidationError, "Webhook Secret"):
			doc.save()
		doc = frappe.get_doc("BTU Task", task.name)
		doc.alert_rules[0].update({"webhook_url": "http://127.0.0.1:3306/", "webhook_secret": SECRET})
		doc.save()

	def test_each_post_is_signed_with_the_rules_secret(self):
		server = HTTPServer(("127.0.0.1", 0), Signed)
		server.received = []
		threading.Thread(target=server.serve_forever, daemon=True).start()
		self.addCleanup(server.server_close)
		self.addCleanup(server.shutdown)
		task = self.webhook_task(f"http://127.0.0.1:{server.server_port}/hook")
		self.assertEqual(api.test_alert("BTU Task", task.name, task.alert_rules[0].name)["errors"], [])
		[(signature, body)] = server.received
		self.assertEqual(signature, base64.b64encode(hmac.new(SECRET.encode(), body, hashlib.sha256).digest()).decode())

	def test_a_test_alert_waits_for_a_slow_webhook_no_longer_than_its_time_limit(self):
		with dribbling_server(b"HTTP/1.1 204 No Content, a byte every 0.2 s\r\n\r\n") as url:
			task = self.webhook_task(url)
			started = time.monotonic()
			with mock.patch.object(webhooks, "WEBHOOK_TIMEOUT_SECS", 1):
				reply = api.test_alert("BTU Task", task.name, task.alert_rules[0].name)
			self.assertLess(time.monotonic() - started, 3, "the whole POST is bounded, not each read")
		self.assertIn("did not answer within 1 s", reply["errors"][0])
