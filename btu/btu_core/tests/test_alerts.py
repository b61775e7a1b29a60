"""Alerts: one incident and one message per problem, repeats counted, one recovery message; pause on failure;
missed fires, late starts, stuck runs, no scheduler; webhooks to a real HTTP server; who may do what."""

import json
import socket
import threading
from datetime import timedelta
from http.server import BaseHTTPRequestHandler, HTTPServer
from unittest import mock

import frappe

import btu.btu_core.api as api
from btu.btu_core.alerts import delivery, incidents, rules, run_events, watchdog, webhooks
from btu.btu_core.instants import to_system_naive, utc_now
from btu.btu_core.runs.lost_runs import mark_lost_runs_timed_out
from btu.btu_core.runs.task_run import run_in_this_process
from btu.btu_core.task_runner import run_scheduled_task
from btu.btu_core.tests.utils import delete_committed, make_schedule, make_task, make_user
from btu.shared import protocol
from btu.shared.instants import format_utc_iso

try:
	from frappe.tests import IntegrationTestCase
except ImportError:
	from frappe.tests.utils import FrappeTestCase as IntegrationTestCase

MANAGER = "btu-alerts-manager@example.com"
PLAIN = "btu-alerts-plain@example.com"
INCIDENT = "BTU Alert Incident"


class Receiver(BaseHTTPRequestHandler):
	"""Keeps each POSTed JSON body on the server."""

	def do_POST(self):
		length = int(self.headers.get("Content-Length") or 0)
		self.server.bodies.append(json.loads(self.rfile.read(length)))
		self.send_response(204)
		self.end_headers()

	def log_message(self, *args):
		pass


def rule(event="Failure", **values):
	return {"event": event, "by_email": 1, "by_bell": 1, "recipients": "oncall@example.com\nAdministrator", **values}


class AlertCase(IntegrationTestCase):
	"""The runner and the alerts commit, so each test removes what it made."""

	@classmethod
	def setUpClass(cls):
		super().setUpClass()
		make_user(MANAGER, ("BTU Manager",))
		make_user(PLAIN)
		frappe.db.commit()

	def setUp(self):
		self.tasks = []
		self.sent = []
		# The scheduler is told through its RPC: recorded here, as no scheduler runs in tier 2.
		patcher = mock.patch(
			"btu.btu_core.scheduler_link.send",
			side_effect=lambda kind, content=None: (
				self.sent.append((kind, content)) or protocol.Reply("ok", "", None, 1.0)
			),
		)
		patcher.start()
		self.addCleanup(patcher.stop)

	def tearDown(self):
		frappe.set_user("Administrator")
		frappe.db.rollback()
		for task in self.tasks:
			for name in frappe.get_all(INCIDENT, filters={"task": task}, pluck="name"):
				frappe.db.delete("Notification Log", {"document_type": INCIDENT, "document_name": name})
				frappe.db.delete("Email Queue", {"reference_doctype": INCIDENT, "reference_name": name})
				frappe.delete_doc(INCIDENT, name, force=True, ignore_permissions=True)
			frappe.db.commit()
			delete_committed(task)

	def task(self, rules=(), fail=True, **values):
		task = make_task("maybe_fail", arguments=json.dumps({"fail": fail}), alert_rules=list(rules), **values)
		self.tasks.append(task.name)
		frappe.db.commit()
		return task

	def set_fail(self, task, fail):
		frappe.db.set_value("BTU Task", task.name, "arguments", json.dumps({"fail": fail}))
		frappe.db.commit()

	def incidents(self, task, **filters):
		return frappe.get_all(INCIDENT, filters={"task": task, **filters}, fields=["*"], order_by="creation")

	def bells(self, incident):
		return frappe.db.count(
			"Notification Log", {"document_type": INCIDENT, "document_name": incident, "for_user": "Administrator"}
		)

	def mails(self, incident):
		"""Mails queued for the incident, or (a site without outgoing mail) their failures noted on it."""
		errors = frappe.db.get_value(INCIDENT, incident, "delivery_errors") or ""
		noted = sum(" email to " in line for line in errors.splitlines())
		return frappe.db.count("Email Queue", {"reference_doctype": INCIDENT, "reference_name": incident}) + noted


class TestRunAlerts(AlertCase):
	"""Failure, recovery, consecutive failures, pause on failure, late start: what a run reports."""

	def test_a_failure_opens_one_incident_with_one_message_repeats_are_counted_and_recovery_tells_once(self):
		task = self.task(
			[rule("Failure")], mail_run_output=1
		)  # the run's mail may carry what it raised, never an alert
		first = run_in_this_process(task.name)
		second = run_in_this_process(task.name)
		self.assertEqual((first.status, second.status), ("Failed", "Failed"))
		[incident] = self.incidents(task.name)
		self.assertEqual(
			(incident.status, incident.kind, incident.occurrences, incident.log), ("Open", "Failure", 2, second.name)
		)
		self.assertNotIn("failing as asked", incident.last_message)
		self.assertIn(second.name, incident.last_message)
		self.assertEqual(self.bells(incident.name), 1)
		self.assertEqual(self.mails(incident.name), 1)
		self.set_fail(task, False)
		self.assertEqual(run_in_this_process(task.name).status, "Succeeded")
		[incident] = self.incidents(task.name)
		self.assertEqual(incident.status, "Resolved")
		self.assertEqual((self.bells(incident.name), self.mails(incident.name)), (2, 2))
		# A success with nothing open tells nobody.
		run_in_this_process(task.name)
		self.assertEqual((len(self.incidents(task.name)), self.bells(incident.name)), (1, 2))

	def test_an_alert_that_breaks_never_fails_the_run(self):
		task = self.task([rule("Failure")], fail=False)
		with mock.patch.object(run_events, "rules_for", side_effect=RuntimeError("alerts broken")):
			log = run_in_this_process(task.name)
		self.assertEqual(frappe.db.get_value("BTU Task Log", log.name, "status"), "Succeeded")

	def test_consecutive_failures_alert_at_the_threshold_only(self):
		task = self.task([rule("Consecutive Failures", threshold=3, by_email=0)])
		for expected in (0, 0, 1, 1):
			run_in_this_process(task.name)
			self.assertEqual(len(self.incidents(task.name)), expected)
		[incident] = self.incidents(task.name)
		self.assertEqual((incident.occurrences, self.bells(incident.name)), (2, 1))
		self.assertTrue(incident.last_message.startswith("3 failed runs in a row"), incident.last_message)

	def test_a_retried_failure_neither_counts_nor_alerts(self):
		task = self.task([rule("Failure")])
		schedule = make_schedule(task.name)
		log = frappe.get_doc(
			{"doctype": "BTU Task Log", "task": task.name, "schedule": schedule.name, "status": "Failed"}
		).insert()
		run_events.run_finished(log, task, schedule, final=False)
		self.assertEqual(
			(self.incidents(task.name), frappe.db.get_value("BTU Task Schedule", schedule.name, "failure_streak")),
			([], 0),
		)
		run_events.run_finished(log, task, schedule, final=True)
		self.assertEqual(len(self.incidents(task.name)), 1)

	def test_pause_after_n_failures_pauses_tells_the_scheduler_alerts_and_resuming_clears_the_streak(self):
		task = self.task()
		schedule = make_schedule(
			task.name,
			enabled=1,
			pause_after_failures=2,
			alert_rules=[rule("Paused", by_email=0), rule("Consecutive Failures", threshold=2, by_email=0)],
		)
		frappe.db.commit()
		self.sent.clear()
		run_in_this_process(task.name, schedule=schedule.name)
		self.assertEqual(frappe.db.get_value("BTU Task Schedule", schedule.name, ["paused", "failure_streak"]), (0, 1))
		run_in_this_process(task.name, schedule=schedule.name)
		paused, note, streak = frappe.db.get_value(
			"BTU Task Schedule", schedule.name, ["paused", "pause_note", "failure_streak"]
		)
		self.assertEqual((paused, streak), (1, 2))
		self.assertIn("after 2 failed runs in a row", note)
		self.assertEqual(self.sent, [(protocol.CREATE_TASK_SCHEDULE, schedule.name)])
		kinds = sorted(i.kind for i in self.incidents(task.name, status="Open"))
		self.assertEqual(kinds, ["Consecutive Failures", "Paused"])
		doc = frappe.get_doc("BTU Task Schedule", schedule.name)
		doc.paused = 0
		doc.save()
		frappe.db.commit()
		self.assertEqual(
			frappe.db.get_value("BTU Task Schedule", schedule.name, ["failure_streak", "pause_note"]), (0, None)
		)
		[paused_incident] = self.incidents(task.name, kind="Paused")
		self.assertEqual(paused_incident.status, "Resolved")
		self.assertEqual(self.bells(paused_incident.name), 2)

	def test_a_success_ends_the_streak_of_a_schedule_without_rules(self):
		task = self.task()
		schedule = make_schedule(task.name)
		frappe.db.commit()
		for _ in range(2):
			run_in_this_process(task.name, schedule=schedule.name)
		self.assertEqual(frappe.db.get_value("BTU Task Schedule", schedule.name, "failure_streak"), 2)
		self.set_fail(task, False)
		run_in_this_process(task.name, schedule=schedule.name)
		self.assertEqual(frappe.db.get_value("BTU Task Schedule", schedule.name, "failure_streak"), 0)
		run_in_this_process(task.name, schedule=schedule.name)  # nothing to end: no statement, and still 0
		self.assertEqual(frappe.db.get_value("BTU Task Schedule", schedule.name, "failure_streak"), 0)

	def test_a_form_saved_with_a_stale_streak_keeps_the_counted_one(self):
		task = self.task()
		schedule = make_schedule(task.name)
		frappe.db.commit()
		run_in_this_process(task.name, schedule=schedule.name)
		schedule.reload()
		frappe.db.sql("update `tabBTU Task Schedule` set failure_streak = 5 where name = %s", schedule.name)
		schedule.save()
		self.assertEqual(frappe.db.get_value("BTU Task Schedule", schedule.name, "failure_streak"), 5)

	def test_a_late_start_alerts_and_an_on_time_one_recovers(self):
		task = self.task(fail=False)
		schedule = make_schedule(task.name, alert_rules=[rule("Late Start", threshold=60, by_email=0)])
		frappe.db.commit()
		late = format_utc_iso(utc_now() - timedelta(minutes=10))
		run_scheduled_task(task.name, schedule.name, late, enqueued_at=late, fire_lag_ms=0)
		[incident] = self.incidents(task.name)
		self.assertEqual((incident.kind, incident.schedule, incident.status), ("Late Start", schedule.name, "Open"))
		self.assertIn(late, incident.last_message)
		on_time = format_utc_iso(utc_now())
		run_scheduled_task(task.name, schedule.name, on_time, enqueued_at=on_time, fire_lag_ms=0)
		self.assertEqual(self.incidents(task.name)[0].status, "Resolved")


class TestCheckedAlerts(AlertCase):
	"""Missed fires, stuck runs, lost runs, no scheduler: what the minute check finds."""

	def test_missed_slots_alert_once_and_a_logged_slot_recovers(self):
		task = self.task(fail=False)
		schedule = make_schedule(
			task.name,
			enabled=1,
			run_frequency="Cron Style",
			cron_string="* * * * *",
			alert_rules=[rule("Missed Fire", threshold=60, by_email=0)],
		)
		# As if saved 5 minutes ago: the slots since then are the ones watched.
		frappe.db.sql(
			"update `tabBTU Task Schedule` set modified = %s where name = %s",
			(to_system_naive(utc_now() - timedelta(minutes=5)), schedule.name),
		)
		frappe.db.commit()
		now = utc_now()
		watchdog.check_missed(now)
		watchdog.check_missed(now)
		[incident] = self.incidents(task.name)
		self.assertEqual((incident.kind, incident.schedule, incident.occurrences), ("Missed Fire", schedule.name, 1))
		self.assertIn("have no Task Log 60 s after their fire time", incident.last_message)
		self.assertEqual(self.bells(incident.name), 1)
		newest = incident.last_key
		frappe.get_doc(
			{
				"doctype": "BTU Task Log",
				"task": task.name,
				"schedule": schedule.name,
				"slot_utc": newest,
				"status": "Succeeded",
			}
		).insert()
		frappe.db.commit()
		watchdog.check_missed(now)
		self.assertEqual(self.incidents(task.name)[0].status, "Resolved")
		self.assertEqual(self.bells(incident.name), 2)
		# The slots before the resolution are not alerted again.
		watchdog.check_missed(utc_now() + timedelta(seconds=30))
		self.assertEqual(len(self.incidents(task.name)), 1)

	def test_more_schedules_than_one_check_reads_each_get_their_turn(self):
		task = self.task([rule("Missed Fire", by_email=0)], fail=False)
		names = sorted(
			make_schedule(task.name, enabled=1, run_frequency="Cron Style", cron_string="* * * * *").name
			for _ in range(3)
		)
		frappe.db.commit()
		frappe.cache().delete_value(watchdog.MISSED_CURSOR_KEY)
		self.addCleanup(frappe.cache().delete_value, watchdog.MISSED_CURSOR_KEY)
		seen, mine = [], rules.rules_for(("Missed Fire",), task.name)
		with (
			mock.patch.object(watchdog, "MAX_CHECKED", 2),
			mock.patch.object(watchdog, "all_rules", lambda event, limit: mine),
			mock.patch.object(watchdog, "missed_slots", lambda rule, schedule, now: seen.append(schedule.name)),
		):
			watchdog.check_missed(utc_now())
			watchdog.check_missed(utc_now())
		self.assertEqual(seen, [*names[:2], names[2], names[0]])

	def test_a_paused_or_disabled_schedule_misses_nothing(self):
		task = self.task(fail=False)
		make_schedule(
			task.name,
			enabled=1,
			paused=1,
			cron_string="* * * * *",
			run_frequency="Cron Style",
			alert_rules=[rule("Missed Fire", by_email=0)],
		)
		make_schedule(
			task.name,
			enabled=0,
			cron_string="* * * * *",
			run_frequency="Cron Style",
			alert_rules=[rule("Missed Fire", by_email=0)],
		)
		frappe.db.commit()
		watchdog.check_missed(utc_now() + timedelta(hours=1))
		self.assertEqual(self.incidents(task.name), [])

	def test_a_run_started_past_its_time_limit_is_stuck_until_it_ends(self):
		task = self.task([rule("Stuck Run", threshold=30, by_email=0)], max_task_duration=60)
		log = frappe.get_doc(
			{
				"doctype": "BTU Task Log",
				"task": task.name,
				"status": "Started",
				"date_time_started": to_system_naive(utc_now() - timedelta(seconds=80)),
			}
		).insert()
		frappe.db.commit()
		watchdog.check_stuck(utc_now())
		self.assertEqual(self.incidents(task.name), [])
		watchdog.check_stuck(utc_now() + timedelta(seconds=15))
		watchdog.check_stuck(utc_now() + timedelta(seconds=20))
		[incident] = self.incidents(task.name)
		self.assertEqual(
			(incident.kind, incident.log, incident.occurrences, self.bells(incident.name)),
			("Stuck Run", log.name, 1, 1),
		)
		frappe.db.set_value("BTU Task Log", log.name, "status", "Succeeded")
		watchdog.check_stuck(utc_now() + timedelta(seconds=20))
		self.assertEqual(self.incidents(task.name)[0].status, "Resolved")

	def test_a_lost_run_the_sweep_times_out_is_a_failure(self):
		task = self.task([rule("Failure", by_email=0)], max_task_duration=60)
		log = frappe.get_doc(
			{
				"doctype": "BTU Task Log",
				"task": task.name,
				"status": "Started",
				"date_time_started": to_system_naive(utc_now() - timedelta(hours=1)),
			}
		).insert()
		frappe.db.commit()
		self.assertIn(log.name, mark_lost_runs_timed_out())
		[incident] = self.incidents(task.name)
		self.assertEqual((incident.kind, incident.log, self.bells(incident.name)), ("Failure", log.name, 1))

	def test_the_minute_check_runs_each_part_whatever_one_raises(self):
		ran = []

		def check_missed(now):
			raise RuntimeError("broken")

		with (
			mock.patch.object(watchdog, "check_missed", check_missed),
			mock.patch.object(watchdog, "check_stuck", ran.append),
		):
			watchdog.check()
		self.assertEqual(len(ran), 1)

	def test_no_scheduler_for_the_threshold_alerts_and_one_coming_back_recovers(self):
		task = self.task([rule("Scheduler Down", threshold=120, by_email=0)])
		frappe.cache().delete_value(watchdog.ALIVE_KEY)
		now = utc_now()
		with mock.patch.object(watchdog, "scheduler_alive", return_value=False):
			watchdog.check_scheduler(now)
			self.assertEqual(self.incidents(task.name), [])
			watchdog.check_scheduler(now + timedelta(seconds=121))
			watchdog.check_scheduler(now + timedelta(seconds=181))
		[incident] = self.incidents(task.name)
		self.assertEqual((incident.kind, incident.occurrences, self.bells(incident.name)), ("Scheduler Down", 1, 1))
		with mock.patch.object(watchdog, "scheduler_alive", return_value=True):
			watchdog.check_scheduler(now + timedelta(seconds=240))
		self.assertEqual(self.incidents(task.name)[0].status, "Resolved")
		frappe.cache().delete_value(watchdog.ALIVE_KEY)


class TestIncidentRace(AlertCase):
	"""Two workers whose runs fail at once: one incident, whichever locks the rule second counts on it; what a message
	quotes."""

	def other_connection(self):
		from frappe.database import get_db

		conf = frappe.conf
		other = get_db(
			host=conf.db_host,
			port=conf.db_port,
			socket=conf.db_socket,
			user=conf.db_user or conf.db_name,
			password=conf.db_password,
			cur_db_name=conf.db_name,
		)
		other.connect()
		self.addCleanup(other.close)
		return other

	def test_a_second_worker_that_read_before_the_first_committed_counts_on_its_incident(self):
		task = self.task([rule("Failure", by_email=0)])
		[failure] = rules.rules_for(("Failure",), task.name)
		frappe.db.commit()
		# This worker has read (bump_streak, rules_for) before the other commits: REPEATABLE READ keeps that view.
		rules.rules_for(("Failure",), task.name)
		mine, other = frappe.local.db, self.other_connection()
		frappe.local.db = other
		try:
			first = incidents.open_incident(failure, task.name, None, "first", key="log-1")
			other.commit()
		finally:
			frappe.local.db = mine
		self.assertIsNone(incidents.open_incident(failure, task.name, None, "second", key="log-2"))
		frappe.db.commit()
		[incident] = self.incidents(task.name)
		self.assertEqual(
			(incident.name, incident.occurrences, incident.last_key, self.bells(incident.name)), (first, 2, "log-2", 1)
		)

	def test_a_message_escapes_what_it_quotes_in_html(self):
		body = {
			"event": "opened",
			"kind": "Failure",
			"task": "T",
			"incident": "INC-<1>",
			"message": "<b>x</b>",
			"url": "https://h/app/x' onclick='y",
		}
		_, text = delivery.render(body)
		self.assertEqual(
			text, '&lt;b&gt;x&lt;/b&gt;<p><a href="https://h/app/x&apos; onclick=&apos;y">INC-&lt;1&gt;</a></p>'
		)


class TestAlertDelivery(AlertCase):
	"""Webhooks to a real HTTP server, who may set them and use the incident API, and what is refused."""

	def setUp(self):
		super().setUp()
		# The test servers listen on loopback, which a webhook reaches only when the site's config allows it.
		allowed = mock.patch.dict(frappe.conf, {webhooks.WEBHOOK_ALLOWED_HOSTS_KEY: ["127.0.0.1"]})
		allowed.start()
		self.addCleanup(allowed.stop)

	def serve(self):
		server = HTTPServer(("127.0.0.1", 0), Receiver)
		server.bodies = []
		threading.Thread(target=server.serve_forever, daemon=True).start()
		self.addCleanup(server.server_close)
		self.addCleanup(server.shutdown)
		return server, f"http://127.0.0.1:{server.server_port}/hook"

	def queued_webhooks(self, call):
		"""Run `call`, returning the webhook jobs it queued (on the short queue, after commit)."""
		with mock.patch("frappe.enqueue") as enqueue:
			call()
		jobs = [c for c in enqueue.call_args_list if c.args[0] == delivery.WEBHOOK_JOB]
		self.assertTrue(jobs and all(c.kwargs["queue"] == "short" for c in jobs), enqueue.call_args_list)
		return [{k: c.kwargs[k] for k in ("rule", "body", "incident")} for c in jobs]

	def test_a_webhook_posts_the_json_body_to_a_real_server(self):
		server, url = self.serve()
		task = self.task([rule("Failure", by_email=0, by_bell=0, webhook_url=url, webhook_secret="s")])
		[job] = self.queued_webhooks(lambda: run_in_this_process(task.name))
		delivery.post_webhook(job["rule"], job["body"], job["incident"])
		[body] = server.bodies
		[incident] = self.incidents(task.name)
		self.assertEqual(
			{k: body[k] for k in ("event", "incident", "kind", "status", "task", "schedule", "occurrences", "site")},
			{
				"event": "opened",
				"incident": incident.name,
				"kind": "Failure",
				"status": "Open",
				"task": task.name,
				"schedule": None,
				"occurrences": 1,
				"site": frappe.local.site,
			},
		)
		self.assertTrue(body["opened_at"].endswith("Z") and body["url"].endswith(incident.name))
		self.assertIsNone(frappe.db.get_value(INCIDENT, incident.name, "delivery_errors"))
		# test_alert sends at once, in the request.
		result = api.test_alert("BTU Task", task.name, task.alert_rules[0].name)
		self.assertEqual(
			(result["errors"], server.bodies[-1]["event"], server.bodies[-1]["kind"]), ([], "test", "Failure")
		)

	def test_a_failing_webhook_is_noted_on_the_incident_never_raised(self):
		with socket.socket() as probe:
			probe.bind(("127.0.0.1", 0))
			closed = probe.getsockname()[1]
		task = self.task(
			[rule("Failure", by_email=0, by_bell=0, webhook_url=f"http://127.0.0.1:{closed}/hook", webhook_secret="s")]
		)
		jobs = self.queued_webhooks(lambda: self.assertEqual(run_in_this_process(task.name).status, "Failed"))
		delivery.post_webhook(**jobs[0])
		[incident] = self.incidents(task.name)
		self.assertIn("webhook delivery failed", incident.delivery_errors)
		self.assertIn(
			f"webhook http://127.0.0.1:{closed}/hook of alert rule",
			api.test_alert("BTU Task", task.name, task.alert_rules[0].name)["errors"][0],
		)

	def test_the_paths_stored_before_alerts_was_a_package_still_resolve(self):
		"""A webhook job queued before the upgrade names alerts.post_webhook; the watchdog's Scheduled Job Type row
		names alerts.check until migrate resyncs it."""
		self.assertIs(frappe.get_attr("btu.btu_core.alerts.post_webhook"), delivery.post_webhook)
		self.assertIs(frappe.get_attr("btu.btu_core.alerts.check"), watchdog.check)

	def test_only_a_system_manager_sets_a_webhook_and_only_to_an_http_url(self):
		task = self.task([rule("Failure")])
		frappe.set_user(MANAGER)
		doc = frappe.get_doc("BTU Task", task.name)
		doc.alert_rules[0].webhook_url = "http://169.254.169.254/latest/meta-data"
		with self.assertRaises(frappe.PermissionError):
			doc.save(ignore_permissions=True)
		doc = frappe.get_doc("BTU Task", task.name)
		doc.append("alert_rules", rule("Failure", webhook_url="http://127.0.0.1:8000/"))
		with self.assertRaises(frappe.PermissionError):
			doc.save(ignore_permissions=True)
		# A rule without a webhook, telling the site's users, is a BTU Manager's to add.
		doc = frappe.get_doc("BTU Task", task.name)
		doc.append("alert_rules", rule("Stuck Run", recipients=MANAGER))
		doc.save()
		frappe.set_user("Administrator")
		for hostile in ("file:///etc/passwd", "gopher://127.0.0.1:25/", "not a url", "http://", "javascript:alert(1)"):
			doc = frappe.get_doc("BTU Task", task.name)
			doc.alert_rules[0].webhook_url = hostile
			with self.subTest(url=hostile), self.assertRaises(frappe.ValidationError):
				doc.save()
		doc = frappe.get_doc("BTU Task", task.name)
		doc.alert_rules[0].recipients = "oncall@example.com, nobody-by-that-name"
		with self.assertRaises(frappe.ValidationError):
			doc.save()
		doc = frappe.get_doc("BTU Task", task.name)
		doc.alert_rules[0].webhook_url = "https://hooks.example.com/btu"
		doc.alert_rules[0].webhook_secret = "s"
		doc.save()
		self.assertIsNone(webhooks.check_webhook_url("https://hooks.example.com/btu"))

	def test_the_incident_api_checks_roles_and_resolves_without_a_message(self):
		task = self.task([rule("Failure", by_email=0)])
		run_in_this_process(task.name)
		[incident] = self.incidents(task.name)
		frappe.set_user(PLAIN)
		for call in (
			lambda: api.open_incidents(),
			lambda: api.resolve_incident(incident.name),
			lambda: api.test_alert("BTU Task", task.name, "x"),
		):
			with self.assertRaises(frappe.PermissionError):
				call()
		frappe.set_user(MANAGER)
		self.assertIn(incident.name, [row.name for row in api.open_incidents(task=task.name)])
		with self.assertRaises(frappe.ValidationError):
			api.test_alert("User", "Administrator", "x")
		result = api.resolve_incident(incident.name, note="known outage")
		self.assertEqual((result["resolved"], result["resolution"]), (True, f"Resolved by {MANAGER}: known outage"))
		self.assertEqual(api.open_incidents(task=task.name), [])
		self.assertEqual(self.bells(incident.name), 1)
		self.assertFalse(api.resolve_incident(incident.name)["resolved"])
		# The failure happening again opens a new incident, and tells again.
		frappe.set_user("Administrator")
		run_in_this_process(task.name)
		self.assertEqual([i.status for i in self.incidents(task.name)], ["Resolved", "Open"])

	def test_a_test_alert_whose_email_cannot_be_queued_names_it_once(self):
		"""A site without an outgoing Email Account: the email is one error naming its recipients, Frappe's own
		message of it taken back (the Desk showed both), and the test reached only the Desk notification's user."""

		def no_account(**_mail):
			frappe.throw("Please setup default Email Account from Settings > Email Account", frappe.OutgoingEmailError)

		task = self.task([rule("Failure", by_email=1, by_bell=1, recipients="Administrator")])
		frappe.local.message_log = []
		with mock.patch("frappe.sendmail", side_effect=no_account):
			result = api.test_alert("BTU Task", task.name, task.alert_rules[0].name)
		self.assertEqual((result["emails"], result["users"]), ([], ["Administrator"]))
		self.assertEqual(len(result["errors"]), 1)
		self.assertIn("OutgoingEmailError: Please setup default Email Account", result["errors"][0])
		self.assertEqual(frappe.local.message_log, [])
