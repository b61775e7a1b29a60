"""Nothing a run is given or leaves is learnable by filter or count (issue 41, item 1), asked over HTTP as an
attacker would: a Guest, a Website User, a Desk user without BTU roles, a BTU Manager and a System Manager each ask
every generic endpoint Frappe serves to filter or count a BTU DocType (and its Versions) by a sealed field, once
with the secret's true text and once with one character changed. The answers must be the same: otherwise the
difference is one bit of the secret, and a `like` pattern reads it a character at a time. No answer may carry the
secret itself, and the Task Log Summary shows an enqueued run to a System Manager only.

The values are sealed (btu.shared.sealed): the mechanism's own tests are test_sealed_values.py.
"""

from __future__ import annotations

import json
import re
from datetime import datetime, timedelta, timezone
from unittest import mock

import frappe
import requests
from frappe.utils.password import get_encryption_key

from btu.btu_core.runs.enqueue import enqueue_at
from btu.btu_core.runs.task_run import run_in_this_process
from btu.btu_core.task_runner import run_scheduled_task
from btu.btu_core.tests.desk.case import Desk
from btu.btu_core.tests.desk.people import LOGINS, Person
from btu.btu_core.tests.utils import SAMPLES, delete_committed, make_schedule, make_task, patient
from btu.shared import protocol
from btu.shared.instants import parse_utc_iso
from btu.shared.run_kind import RunKey, RunKind

try:
	from frappe.tests import IntegrationTestCase
except ImportError:
	from frappe.tests.utils import FrappeTestCase as IntegrationTestCase

WEBSITE_USER = "btu-probe-website@example.com"
ROLES = {
	"Guest": None,
	"Website User": WEBSITE_USER,
	"Desk user without BTU roles": LOGINS[Person.PLAIN_USER].email,
	"BTU Manager": LOGINS[Person.BTU_MANAGER].email,
	"System Manager": LOGINS[Person.SYSTEM_MANAGER].email,
}
TOKEN = frappe.generate_hash(length=12)


def secret(where: str) -> str:
	return f"zq{where}{TOKEN}"


def missed(text: str) -> str:
	"""`text` with its last character changed: a guess one character wrong."""
	return text[:-1] + ("0" if text[-1] != "0" else "1")


def like(text: str) -> str:
	return f"%{text}%"


# Each endpoint as (its name, the HTTP request asking it to filter `doctype` by `field` like `pattern`).
def get_count(doctype, field, pattern):
	return "POST", "/api/method/frappe.client.get_count", {"doctype": doctype, "filters": [[field, "like", pattern]]}


def get_list(doctype, field, pattern):
	return (
		"POST",
		"/api/method/frappe.client.get_list",
		{
			"doctype": doctype,
			"fields": ["name"],
			"filters": [[field, "like", pattern]],
		},
	)


def get_list_or(doctype, field, pattern):
	return (
		"POST",
		"/api/method/frappe.client.get_list",
		{
			"doctype": doctype,
			"fields": ["name"],
			"or_filters": [[field, "like", pattern]],
		},
	)


def reportview_count(doctype, field, pattern):
	return (
		"POST",
		"/api/method/frappe.desk.reportview.get_count",
		{
			"doctype": doctype,
			"filters": [[doctype, field, "like", pattern]],
		},
	)


def reportview_get(doctype, field, pattern):
	return (
		"POST",
		"/api/method/frappe.desk.reportview.get",
		{
			"doctype": doctype,
			"fields": [f"`tab{doctype}`.`name`"],
			"filters": [[doctype, field, "like", pattern]],
		},
	)


def group_by_count(doctype, field, pattern):
	return (
		"POST",
		"/api/method/frappe.desk.listview.get_group_by_count",
		{
			"doctype": doctype,
			"current_filters": [[doctype, field, "like", pattern]],
			"field": "owner",
		},
	)


def resource_list(doctype, field, pattern):
	return "GET", f"/api/resource/{doctype}", {"fields": ["name"], "filters": [[field, "like", pattern]]}


def export(doctype, field, pattern):
	return (
		"POST",
		"/api/method/frappe.desk.reportview.export_query",
		{
			"doctype": doctype,
			"file_format_type": "CSV",
			"fields": [f"`tab{doctype}`.`name`"],
			"filters": [[doctype, field, "like", pattern]],
		},
	)


ENDPOINTS = (get_count, get_list, get_list_or, reportview_count, reportview_get, group_by_count, resource_list, export)


class TestNothingLearnable(IntegrationTestCase):
	"""One of each: a Task's arguments, a Schedule's overrides, an enqueued run's kwargs and Log, a Task run's Log, and
	the Version a changed argument left; committed, since the web server is another process."""

	@classmethod
	def setUpClass(cls):
		super().setUpClass()
		frappe.set_user("Administrator")
		# The API secrets below are encrypted with the site's key: made now if the site has none, and a web server that
		# read the site's config before (v16 keeps it 60 s) would make another, and read no secret.
		had_key = bool(frappe.local.conf.get("encryption_key"))
		get_encryption_key()
		cls.server = Desk.open() if had_key else Desk.new_server()
		make_website_user()
		cls.task = make_task(arguments=json.dumps({"name": secret("task")})).name
		cls.schedule = make_schedule(cls.task, argument_overrides=json.dumps({"name": secret("override")})).name
		task = frappe.get_doc("BTU Task", cls.task)
		task.arguments = json.dumps({"name": secret("version")})
		task.save(ignore_version=False)  # in tests Frappe writes no Version unless asked
		frappe.db.commit()
		cls.task_log = run_in_this_process(cls.task).name  # result_message and stdout: hello <secret("version")>
		cls.request, cls.enqueued_log = run_enqueued(secret("enqueued"))
		# (doctype, field, the secret in it) for every sealed value above, and the Version of the changed arguments.
		cls.locations = (
			("BTU Task", "arguments", secret("task")),
			("BTU Task Schedule", "argument_overrides", secret("override")),
			("BTU Run Request", "kwargs", secret("enqueued")),
			("BTU Task Log", "stdout", secret("version")),
			("BTU Task Log", "result_message", secret("version")),
			("BTU Task Log", "stdout", secret("enqueued")),
			("Version", "data", secret("task")),
		)
		cls.sessions = {role: login(user) for role, user in ROLES.items()}
		frappe.db.commit()

	@classmethod
	def tearDownClass(cls):
		frappe.set_user("Administrator")
		frappe.db.rollback()
		frappe.db.delete("BTU Task Log", {"name": ("in", (cls.task_log, cls.enqueued_log))})
		frappe.db.delete("BTU Run Request", cls.request)
		frappe.db.delete("Version", {"ref_doctype": "BTU Task", "docname": cls.task})
		delete_committed(cls.task)  # and the sealed values of every row deleted here
		frappe.db.commit()
		super().tearDownClass()

	def ask(self, role: str, method: str, path: str, data: dict) -> tuple[int, str]:
		payload = {key: json.dumps(value) if not isinstance(value, str) else value for key, value in data.items()}
		session = self.sessions[role]
		if method == "GET":
			answer = session.get(self.server.url + path, params=payload, timeout=patient(30))
		else:
			answer = session.post(self.server.url + path, data=payload, timeout=patient(30))
		# Each error answer carries an id of its own (__frappe_exc_id): not a difference between hit and miss.
		return answer.status_code, re.sub(r"__frappe_exc_id[^0-9a-f]*[0-9a-f]+", "__frappe_exc_id", answer.text)

	def test_no_endpoint_tells_a_secret_from_a_guess_one_character_off(self):
		asked = 0
		for role in ROLES:
			for endpoint in ENDPOINTS:
				for doctype, field, text in self.locations:
					with self.subTest(role=role, endpoint=endpoint.__name__, doctype=doctype, field=field):
						hit = self.ask(role, *endpoint(doctype, field, like(text)))
						miss = self.ask(role, *endpoint(doctype, field, like(missed(text))))
						asked += 2
						self.assertEqual(
							hit[0], miss[0], f"{endpoint.__name__} as {role}: {hit[1][:300]} / {miss[1][:300]}"
						)
						self.assertEqual(hit[1].replace(text, missed(text)), miss[1], f"{endpoint.__name__} as {role}")
						self.assertNotIn(TOKEN, hit[1].replace(like(text), ""), f"{endpoint.__name__} as {role}")
		self.assertEqual(asked, 2 * len(ROLES) * len(ENDPOINTS) * len(self.locations))

	def test_grouping_by_a_sealed_field_shows_none_of_its_values(self):
		for role in ROLES:
			for doctype, field, _text in self.locations[:-1]:
				with self.subTest(role=role, doctype=doctype, field=field):
					_status, body = self.ask(
						role,
						"POST",
						"/api/method/frappe.desk.listview.get_group_by_count",
						{"doctype": doctype, "current_filters": [], "field": field},
					)
					self.assertNotIn(TOKEN, body)

	def test_search_finds_no_secret(self):
		for role in ROLES:
			for doctype, _field, text in self.locations:
				with self.subTest(role=role, doctype=doctype):
					_status, body = self.ask(
						role, "POST", "/api/method/frappe.desk.search.search_link", {"doctype": doctype, "txt": text}
					)
					self.assertNotIn(TOKEN, body)
					_status, body = self.ask(
						role, "POST", "/api/method/frappe.utils.global_search.search", {"text": text}
					)
					self.assertNotIn(TOKEN, body)

	def test_the_task_log_summary_shows_an_enqueued_run_to_a_system_manager_only(self):
		method = f"{SAMPLES}.say_hello"
		report = {"report_name": "Task Log Summary", "filters": {}}
		shown = {}
		for role in ("BTU Manager", "System Manager"):
			status, body = self.ask(role, "POST", "/api/method/frappe.desk.query_report.run", report)
			self.assertEqual(status, 200, body[:500])
			rows = json.loads(body)["message"]["result"]
			shown[role] = {row.get("method") for row in rows if isinstance(row, dict) and not row.get("task")}
		self.assertNotIn(method, shown["BTU Manager"])
		self.assertIn(method, shown["System Manager"])

	def test_a_reader_the_grant_allows_still_reads_them(self):
		def read(role, doctype, name):
			status, body = self.ask(role, "GET", f"/api/resource/{doctype}/{name}", {})
			return json.loads(body).get("data", {}) if status == 200 else {}

		self.assertIn(secret("version"), read("System Manager", "BTU Task", self.task)["arguments"])
		self.assertIn(secret("version"), read("BTU Manager", "BTU Task", self.task)["arguments"])
		self.assertIn(secret("override"), read("BTU Manager", "BTU Task Schedule", self.schedule)["argument_overrides"])
		self.assertIn(secret("version"), read("BTU Manager", "BTU Task Log", self.task_log)["stdout"])
		self.assertIn(secret("enqueued"), read("System Manager", "BTU Run Request", self.request)["kwargs"])
		self.assertIn(secret("enqueued"), read("System Manager", "BTU Task Log", self.enqueued_log)["stdout"])
		# Beyond the grant: the kwargs' permlevel, an enqueued run's Log, and no BTU role at all.
		self.assertNotIn("kwargs", read("BTU Manager", "BTU Run Request", self.request))
		self.assertEqual(read("BTU Manager", "BTU Task Log", self.enqueued_log), {})
		self.assertEqual(read("Desk user without BTU roles", "BTU Task", self.task), {})
		self.assertEqual(read("Website User", "BTU Task Log", self.task_log), {})


def make_website_user() -> None:
	if not frappe.db.exists("User", WEBSITE_USER):
		user = frappe.new_doc("User")
		user.update({"email": WEBSITE_USER, "first_name": "probe", "send_welcome_email": 0})
		user.insert(ignore_permissions=True)
	frappe.db.set_value("User", WEBSITE_USER, {"enabled": 1, "user_type": "Website User"})
	frappe.db.commit()


def login(user: str | None) -> requests.Session:
	"""A session that signs each request with `user`'s API key and secret, as a script does (a cookie session's POST
	would need the Desk's CSRF token); a Guest's sends none."""
	session = requests.Session()
	if user is not None:
		doc = frappe.get_doc("User", user)
		doc.api_key = doc.api_key or frappe.generate_hash(length=15)
		api_secret = frappe.generate_hash(length=15)
		doc.api_secret = api_secret
		doc.save(ignore_permissions=True)
		session.headers["Authorization"] = f"token {doc.api_key}:{api_secret}"
	return session


def run_enqueued(name: str) -> tuple[str, str]:
	"""An enqueued run with task_log=True, run here: its request and its Log."""
	with mock.patch("btu.btu_core.scheduler_link.send", return_value=protocol.Reply("ok", "", None, 1.0)):
		request = enqueue_at(
			f"{SAMPLES}.say_hello", datetime.now(timezone.utc) + timedelta(minutes=5), task_log=True, name=name
		)
		frappe.db.commit()
		run_at_utc = frappe.db.get_value("BTU Run Request", request, "run_at_utc")
		slot = parse_utc_iso(run_at_utc, "run_at_utc").replace(microsecond=0).isoformat()
		run_scheduled_task(
			f"{SAMPLES}.say_hello",
			RunKey(RunKind.RUN_REQUEST, request).format(),
			slot,
			run_at_utc,
			kind=RunKind.RUN_REQUEST.value,
		)
	frappe.db.commit()
	return request, frappe.db.get_value("BTU Task Log", {"run_request": request})
