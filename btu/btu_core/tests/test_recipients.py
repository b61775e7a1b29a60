"""Who BTU mails, by whose choice (issue 32 item 4): a BTU Manager names the site's Desk users and BTU's roles, a
System Manager anyone; run output goes by mail only where a System Manager opted the Task in; test alerts are
rate-limited and their subject's prefix is a System Manager's."""

from unittest import mock

import frappe

import btu.btu_core.api as api
from btu.btu_core.alerts import delivery, incidents
from btu.btu_core.runs.task_run import run_in_this_process
from btu.btu_core.tests.test_alerts import MANAGER, AlertCase, rule
from btu.btu_core.tests.utils import make_schedule, make_user

CONFIG = "BTU Configuration"
SYSTEM_MANAGER = "btu-recipients-system-manager@example.com"
# A Desk user of the site (another BTU Manager) and a portal user (no Desk role: a Website User).
COLLEAGUE = "btu-recipients-colleague@example.com"
PORTAL = "btu-recipients-portal@example.com"
OUTSIDE = "mallory@evil.example"
OTHER_ROLE = "Website Manager"


def appended(doc, table: str, row: dict):
	doc.append(table, row)
	return doc


class RecipientsCase(AlertCase):
	@classmethod
	def setUpClass(cls):
		super().setUpClass()
		make_user(SYSTEM_MANAGER, ("System Manager",))
		make_user(COLLEAGUE, ("BTU Manager",))
		make_user(PORTAL)
		frappe.db.commit()

	def refused(self, changed, *named):
		"""The save of `changed()` (a changed document, loaded afresh) is refused on every path with a PermissionError
		naming `named`, the role and the fix."""
		for ignore_permissions in (False, True):
			with self.subTest(ignore_permissions=ignore_permissions):
				with self.assertRaises(frappe.PermissionError) as caught:
					changed().save(ignore_permissions=ignore_permissions)
				for text in (*named, "System Manager", frappe.session.user, "ask a System Manager"):
					self.assertIn(text, str(caught.exception))


class TestWhoMayBeTold(RecipientsCase):
	def test_a_btu_manager_names_the_sites_desk_users_and_btus_roles_only(self):
		task = self.task()
		schedule = make_schedule(task.name)
		frappe.db.commit()
		frappe.set_user(MANAGER)
		for table, row, named in (
			("email_recipients", {"email_address": OUTSIDE, "email_on_error": 1}, ("email_address", OUTSIDE)),
			("email_recipients", {"email_address": PORTAL, "email_on_error": 1}, ("email_address", PORTAL)),
			("alert_rules", rule(recipients=f"{COLLEAGUE}\n{OUTSIDE}"), ("recipients", OUTSIDE)),
			("alert_rules", rule(recipients=COLLEAGUE, role=OTHER_ROLE), ("role", OTHER_ROLE)),
		):
			for doctype, name in (("BTU Task", task.name), ("BTU Task Schedule", schedule.name), (CONFIG, CONFIG)):
				if table == "alert_rules" and doctype == CONFIG:
					continue  # BTU Configuration has default email recipients, no alert rules
				with self.subTest(doctype=doctype, table=table, row=row):
					self.refused(lambda: appended(frappe.get_doc(doctype, name), table, row), *named)
		# The site's Desk users, by user id or email, and BTU's roles are theirs to name.
		doc = frappe.get_doc("BTU Task", task.name)
		doc.append("email_recipients", {"email_address": COLLEAGUE, "email_on_error": 1})
		doc.append("alert_rules", rule(recipients=f"{COLLEAGUE}, {MANAGER}", role="BTU Manager"))
		doc.save()

	def test_a_system_manager_names_anyone_and_a_btu_manager_keeps_what_they_named(self):
		task = self.task()
		frappe.set_user(SYSTEM_MANAGER)
		doc = frappe.get_doc("BTU Task", task.name)
		doc.append("email_recipients", {"email_address": OUTSIDE, "email_on_error": 1})
		doc.append("alert_rules", rule(recipients=OUTSIDE, role=OTHER_ROLE))
		doc.save()
		frappe.set_user(MANAGER)
		doc = frappe.get_doc("BTU Task", task.name)
		doc.desc_short = "renamed by the manager"
		doc.alert_rules[0].threshold = 5
		doc.alert_rules[0].recipients = f"{OUTSIDE}\n{COLLEAGUE}"
		doc.save()

		def readdressed():
			doc = frappe.get_doc("BTU Task", task.name)
			doc.email_recipients[-1].email_address = "other@evil.example"
			return doc

		self.refused(readdressed, "email_address", "other@evil.example")


class TestRunOutputInMail(RecipientsCase):
	def test_only_a_system_manager_opts_a_task_in(self):
		self.assertEqual(frappe.get_meta("BTU Task").get_field("mail_run_output").permlevel, 1)
		task = self.task()
		self.assertEqual(task.mail_run_output, 0)
		frappe.set_user(MANAGER)
		doc = frappe.get_doc("BTU Task", task.name)
		doc.mail_run_output = 1
		doc.save()  # the Desk path: permlevel 1 puts the stored value back
		self.assertEqual(frappe.db.get_value("BTU Task", task.name, "mail_run_output"), 0)
		doc = frappe.get_doc("BTU Task", task.name)
		doc.mail_run_output = 1
		with self.assertRaises(frappe.PermissionError) as caught:
			doc.save(ignore_permissions=True)
		self.assertIn("only a System Manager may set mail_run_output", str(caught.exception))
		frappe.set_user(SYSTEM_MANAGER)
		doc = frappe.get_doc("BTU Task", task.name)
		doc.mail_run_output = 1
		doc.save()
		self.assertEqual(frappe.db.get_value("BTU Task", task.name, "mail_run_output"), 1)

	def test_a_failure_mail_carries_the_traceback_only_where_opted_in(self):
		task = self.task(
			[rule("Failure", by_email=0, by_bell=0)], email_recipients=[{"email_address": OUTSIDE, "email_on_error": 1}]
		)
		for opted_in in (0, 1):
			with self.subTest(opted_in=opted_in):
				frappe.db.set_value("BTU Task", task.name, "mail_run_output", opted_in)
				frappe.db.commit()
				with mock.patch("frappe.sendmail") as sendmail:
					log = run_in_this_process(task.name)
				self.assertEqual(log.status, "Failed")
				[mail] = [c.kwargs for c in sendmail.call_args_list if c.kwargs["reference_doctype"] == "BTU Task Log"]
				self.assertIn(log.name, mail["message"])
				self.assertEqual("failing as asked" in mail["message"], bool(opted_in), mail["message"])
				self.assertEqual("Traceback" in mail["message"], bool(opted_in), mail["message"])
				# The alert's message never does: an incident is a row any get_count reads (sealed values).
				[incident] = self.incidents(task.name, status="Open")
				self.assertNotIn("failing as asked", incident.last_message)
				incidents.resolve_by_hand(incident.name)


class TestTestAlerts(RecipientsCase):
	def setUp(self):
		super().setUp()
		self.clear_counts()
		self.addCleanup(self.clear_counts)

	def clear_counts(self):
		frappe.cache().delete_keys(delivery.TEST_COUNT_KEY)

	def tearDown(self):
		for task in self.tasks:
			frappe.db.delete("Notification Log", {"document_type": "BTU Task", "document_name": task})
		super().tearDown()

	def test_a_user_sends_a_few_tests_a_minute_per_rule_and_in_all(self):
		task = self.task(
			[rule("Failure", by_email=0, recipients=COLLEAGUE), rule("Stuck Run", by_email=0, recipients=COLLEAGUE)]
		)
		first, second = (row.name for row in task.alert_rules)
		frappe.set_user(MANAGER)
		for _ in range(delivery.TESTS_PER_RULE):
			self.assertEqual(api.test_alert("BTU Task", task.name, first)["users"], [COLLEAGUE])
		with self.assertRaises(frappe.RateLimitExceededError) as caught:
			api.test_alert("BTU Task", task.name, first)
		self.assertIn(f"user {MANAGER} sent {delivery.TESTS_PER_RULE} tests of this rule", str(caught.exception))
		self.assertIn("wait a minute", str(caught.exception))
		key = frappe.cache().make_key(f"{delivery.TEST_COUNT_KEY}:{MANAGER}:{first}")
		self.assertTrue(0 < frappe.cache().ttl(key) <= delivery.TEST_WINDOW_SECS)
		# Another rule, and another user, have counts of their own; the user's count of all rules has its own limit.
		frappe.set_user(SYSTEM_MANAGER)
		api.test_alert("BTU Task", task.name, first)
		frappe.set_user(MANAGER)
		with mock.patch.object(delivery, "TESTS_PER_USER", delivery.TESTS_PER_RULE + 1):
			api.test_alert("BTU Task", task.name, second)
			with self.assertRaises(frappe.RateLimitExceededError):
				api.test_alert("BTU Task", task.name, second)

	def test_the_subject_prefix_is_a_system_managers(self):
		"""The environment name prefixes every BTU mail's subject, the test's too: not a BTU Manager's free text."""
		stored = frappe.db.get_single_value(CONFIG, "environment_name")
		self.addCleanup(frappe.db.commit)
		self.addCleanup(frappe.db.set_single_value, CONFIG, "environment_name", stored)
		frappe.set_user(MANAGER)
		for ignore_permissions in (False, True):
			with self.subTest(ignore_permissions=ignore_permissions):
				config = frappe.get_single(CONFIG)
				config.environment_name = "Claim your prize at evil.example"
				with self.assertRaises(frappe.PermissionError) as caught:
					config.save(ignore_permissions=ignore_permissions)
				self.assertIn("environment_name", str(caught.exception))
				self.assertIn("Ask a System Manager", str(caught.exception))
		frappe.set_user(SYSTEM_MANAGER)
		config = frappe.get_single(CONFIG)
		config.environment_name = "PROD"
		config.save()
		self.assertEqual(frappe.db.get_single_value(CONFIG, "environment_name"), "PROD")
