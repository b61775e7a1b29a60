"""Task outcomes on a real bench: runs through the task runner are counted in Redis, `scrape` serves them
to the roles it names (in process and over real HTTP with an API key), and runs extend Frappe's monitor entry."""

import json
import threading
import time
import uuid
from datetime import timedelta
from unittest import mock

import frappe
import frappe.monitor
from frappe.utils.background_jobs import get_redis_conn
from prometheus_client import CONTENT_TYPE_LATEST
from prometheus_client.parser import text_string_to_metric_families
from rq.timeouts import JobTimeoutException

from btu.btu_core.insights import metrics, task_outcomes
from btu.btu_core.instants import utc_now
from btu.btu_core.runs.capture import Call
from btu.btu_core.runs.lost_runs import mark_lost_runs_timed_out
from btu.btu_core.runs.run_rows import task_and_schedule
from btu.btu_core.runs.task_run import TaskRun, run_in_this_process
from btu.btu_core.scheduler_link import bench_keys
from btu.btu_core.setup.roles import BTU_METRICS_READER_ROLE
from btu.btu_core.task_runner import run_scheduled_task
from btu.btu_core.tests.utils import delete_committed, make_schedule, make_task, make_user, other_connection, patient
from btu.shared import protocol
from btu.shared.instants import format_utc_iso

try:
	from frappe.tests import IntegrationTestCase
except ImportError:
	from frappe.tests.utils import FrappeTestCase as IntegrationTestCase

PLAIN_USER = "btu-metrics-plain@example.com"
# A Desk role with nothing of BTU's, in Frappe v15 and v16 alike (v16 moved Blogger out with the blog).
PLAIN_ROLE = "Translator"
READER_USER = "btu-metrics-reader@example.com"
MANAGER_USER = "btu-metrics-manager@example.com"
# The endpoint's public path, what Prometheus configs hold (README): hooks.py's override_whitelisted_methods maps it
# onto btu.btu_core.insights.metrics.scrape.
METHOD = "btu.btu_core.metrics.scrape"


def samples_of(body: str) -> dict:
	"""(name, sorted labels) -> value, read back by prometheus_client's own parser."""
	return {
		(s.name, tuple(sorted(s.labels.items()))): s.value
		for f in text_string_to_metric_families(body)
		for s in f.samples
	}


class MetricsCase(IntegrationTestCase):
	"""The runner commits: each test removes its Tasks, their Logs, their fields in the outcome hash and its users."""

	def setUp(self):
		self.tasks = []
		self.users = []

	def tearDown(self):
		frappe.set_user("Administrator")
		for user in self.users:
			frappe.delete_doc("User", user, force=True, ignore_permissions=True)
		frappe.db.commit()
		for task in self.tasks:
			delete_committed(task)
			# those whose fields no deletion removes
			task_outcomes.forget(get_redis_conn(), bench_keys(), frappe.local.site, task)

	def task(self, function="say_hello", **values):
		task = make_task(function, **values)
		self.tasks.append(task.name)
		frappe.db.commit()
		return task

	def user(self, email, roles):
		self.users.append(email)
		return make_user(email, roles)

	def scraped(self, user="Administrator") -> dict:
		frappe.set_user(user)
		try:
			response = metrics.scrape()
		finally:
			frappe.set_user("Administrator")
		self.assertEqual(response.status_code, 200)
		self.assertEqual(response.headers["Content-Type"], CONTENT_TYPE_LATEST)
		return samples_of(response.get_data(as_text=True))

	def value(self, samples, name, **labels):
		return samples.get((name, tuple(sorted({"site": frappe.local.site, **labels}.items()))))


class TestOutcomesCounted(MetricsCase):
	def test_runs_through_the_runner_are_counted_by_status(self):
		task = self.task()
		failing = self.task("insert_then_fail", arguments=json.dumps({"marker": f"btu-metrics-{uuid.uuid4().hex}"}))
		schedule = make_schedule(task.name)
		frappe.db.commit()
		slot = utc_now().replace(microsecond=0) - timedelta(minutes=2)
		run_scheduled_task(task.name, schedule.name, format_utc_iso(slot), fire_lag_ms=3.5)
		run_in_this_process(task.name)
		with self.assertRaises(RuntimeError):
			TaskRun(failing.name).execute()
		# A schedule gone before its run: the run is Skipped.
		run_scheduled_task(task.name, f"TS-gone-{uuid.uuid4().hex[:6]}", format_utc_iso(slot))
		# The same slot delivered again is not a run: nothing is counted.
		run_scheduled_task(task.name, schedule.name, format_utc_iso(slot))

		samples = self.scraped()
		self.assertEqual(self.value(samples, "btu_task_runs_total", task=task.name, status="succeeded"), 2)
		self.assertEqual(self.value(samples, "btu_task_runs_total", task=task.name, status="skipped"), 1)
		self.assertEqual(self.value(samples, "btu_task_runs_total", task=failing.name, status="failed"), 1)
		self.assertIsNone(self.value(samples, "btu_task_runs_total", task=task.name, status="failed"))
		# Durations of the runs that ran (not the skipped one); start lag only of the scheduled one, two minutes late.
		self.assertEqual(self.value(samples, "btu_task_duration_seconds_count", task=task.name), 2)
		self.assertEqual(self.value(samples, "btu_task_duration_seconds_count", task=failing.name), 1)
		self.assertEqual(self.value(samples, "btu_task_start_lag_seconds_count", task=task.name), 1)
		self.assertEqual(self.value(samples, "btu_task_start_lag_seconds_bucket", task=task.name, le="60.0"), 0)
		self.assertEqual(self.value(samples, "btu_task_start_lag_seconds_bucket", task=task.name, le="300.0"), 1)
		self.assertGreaterEqual(self.value(samples, "btu_task_start_lag_seconds_sum", task=task.name), 120)
		finished = self.value(samples, "btu_task_last_finished_timestamp_seconds", task=task.name, status="succeeded")
		self.assertLess(abs(finished - time.time()), 60)
		self.assertEqual(self.value(samples, "btu_task_outcomes_up"), 1)

	def test_timed_out_and_lost_runs_are_counted_timed_out(self):
		task = self.task("sleep_for", arguments='{"seconds": 5}', max_task_duration=1)
		with self.assertRaises(JobTimeoutException):
			TaskRun(task.name).execute()
		lost = frappe.get_doc(
			{
				"doctype": "BTU Task Log", "task": task.name, "status": "Started",
				"date_time_started": frappe.utils.now_datetime() - timedelta(hours=1),
			}
		).insert(ignore_permissions=True)  # fmt: skip
		frappe.db.commit()
		self.assertIn(lost.name, mark_lost_runs_timed_out())
		samples = self.scraped()
		self.assertEqual(self.value(samples, "btu_task_runs_total", task=task.name, status="timed_out"), 2)
		# The lost run's duration is unknown: only the run the runner timed out is in the histogram.
		self.assertEqual(self.value(samples, "btu_task_duration_seconds_count", task=task.name), 1)

	def test_a_lost_run_that_ends_after_all_is_counted_once(self):
		"""The sweep timed the Log out while its worker was still alive: the run's end is written, not counted again."""
		task = self.task()
		run = TaskRun(task.name)
		rows = task_and_schedule(task.name, None)
		log, notes = run.write_started(rows)
		frappe.db.set_value("BTU Task Log", log, "date_time_started", frappe.utils.now_datetime() - timedelta(hours=1))
		frappe.db.commit()
		self.assertIn(log, mark_lost_runs_timed_out())
		with self.assertLogs(frappe.logger("btu"), "INFO") as logged:
			run.write_finished(log, rows, Call(elapsed=0.25), notes)
		self.assertIn("(counted already as Timed Out)", "\n".join(logged.output))
		self.assertEqual(frappe.db.get_value("BTU Task Log", log, "status"), "Succeeded")  # the Log tells the true end
		samples = self.scraped()
		self.assertEqual(self.value(samples, "btu_task_runs_total", task=task.name, status="timed_out"), 1)
		self.assertIsNone(self.value(samples, "btu_task_runs_total", task=task.name, status="succeeded"))
		self.assertIsNone(self.value(samples, "btu_task_duration_seconds_count", task=task.name))

	def test_a_run_ends_on_the_latest_log_after_another_worker_s_sweep(self):
		"""The function's reads fixed this session's snapshot before the sweep (another worker) timed the Log out:
		the end must read the Log as it is now, or its save would fail on a stale timestamp."""
		task = self.task()
		run = TaskRun(task.name)
		rows = task_and_schedule(task.name, None)
		log, notes = run.write_started(rows)
		self.assertEqual(frappe.db.get_value("BTU Task Log", log, "status"), "Started")  # the snapshot
		other = other_connection(self)
		with other.cursor() as cur:
			cur.execute("update `tabBTU Task Log` set status = 'Timed Out', modified = now(6) where name = %s", (log,))
		other.commit()
		other.close()
		run.write_finished(log, rows, Call(elapsed=0.25), notes)
		self.assertEqual(frappe.db.get_value("BTU Task Log", log, "status"), "Succeeded")
		# The sweep counted it (here it is another hand's update): this end adds no count.
		self.assertIsNone(self.value(self.scraped(), "btu_task_runs_total", task=task.name, status="succeeded"))

	def test_the_sweep_waits_for_a_run_ending_under_it_and_leaves_it(self):
		"""A run ends (another worker holds its Log's row) while the sweep looks at it: not timed out, not counted."""
		task = self.task()
		log = frappe.get_doc(
			{
				"doctype": "BTU Task Log",
				"task": task.name,
				"status": "Started",
				"date_time_started": frappe.utils.now_datetime() - timedelta(hours=1),
			}
		).insert(ignore_permissions=True)
		frappe.db.commit()
		other = other_connection(self)
		with other.cursor() as cur:
			cur.execute("select status from `tabBTU Task Log` where name = %s for update", (log.name,))

		def finish():
			time.sleep(1)
			with other.cursor() as cur:
				cur.execute(
					"update `tabBTU Task Log` set status = 'Succeeded', modified = now(6) where name = %s", (log.name,)
				)
			other.commit()

		ender = threading.Thread(target=finish)
		ender.start()
		started = time.monotonic()
		self.assertNotIn(log.name, mark_lost_runs_timed_out())
		ender.join()
		other.close()
		self.assertGreaterEqual(time.monotonic() - started, 0.9, "the sweep did not wait for the Log's row")
		self.assertEqual(frappe.db.get_value("BTU Task Log", log.name, "status"), "Succeeded")
		self.assertEqual({k for k in self.scraped() if dict(k[1]).get("task") == task.name}, set())

	def test_a_deleted_task_s_counts_leave_redis_when_the_deletion_commits(self):
		task, kept = self.task(), self.task()
		for name in (task.name, kept.name):
			run_in_this_process(name)
		key, conn = bench_keys().task_outcomes_key(frappe.local.site), get_redis_conn()

		def fields_of(name):
			return {f for f in conn.hkeys(key) if (task_outcomes.parse_field(f) or ["", None])[1] == name}

		self.assertEqual(len(fields_of(task.name)), 5)  # runs, last, and the duration's count, sum and bucket
		before = fields_of(kept.name)
		frappe.db.delete("BTU Task Log", {"task": task.name})
		frappe.delete_doc("BTU Task", task.name, force=True, ignore_permissions=True)
		self.assertEqual(len(fields_of(task.name)), 5, "removed before the deletion committed")
		frappe.db.rollback()
		self.assertEqual(len(fields_of(task.name)), 5, "removed by a deletion rolled back")
		frappe.db.delete("BTU Task Log", {"task": task.name})
		frappe.delete_doc("BTU Task", task.name, force=True, ignore_permissions=True)
		frappe.db.commit()
		self.assertEqual(fields_of(task.name), set())
		self.assertEqual(fields_of(kept.name), before)

	def test_a_redis_failure_never_fails_a_run_and_is_logged(self):
		task = self.task()
		key = bench_keys().task_outcomes_key(frappe.local.site)
		conn = get_redis_conn()
		aside = f"{key}:aside-{uuid.uuid4().hex[:6]}"
		had = conn.exists(key)
		if had:
			conn.rename(key, aside)
		conn.set(key, "not a hash")  # a real Redis error: WRONGTYPE on every write
		try:
			with self.assertLogs(frappe.logger("btu"), "WARNING") as logged:
				log = run_in_this_process(task.name)
			self.assertEqual(log.status, "Succeeded")
			self.assertIn(f"task={task.name} status=Succeeded not counted for Prometheus", "\n".join(logged.output))
			self.assertIn("WRONGTYPE", "\n".join(logged.output))
			samples = self.scraped()
			self.assertEqual(self.value(samples, "btu_task_outcomes_up"), 0)
		finally:
			conn.delete(key)
			if had:
				conn.rename(aside, key)

	def test_redis_down_costs_a_run_no_time_to_speak_of(self):
		"""Frappe's get_redis_conn retries 5 times 1 s apart: a count must not hold a run that long."""
		from frappe.utils import background_jobs

		task = self.task()
		kept, kept_conf = background_jobs._redis_queue_conn, frappe.conf.redis_queue
		# Nothing listens on port 1: connecting is refused, as when the queue Redis is down. v15 reads the URL from
		# frappe.conf, v16 from frappe.get_site_config(): both say so.
		down = "redis://127.0.0.1:1"
		frappe.conf.redis_queue = down
		background_jobs._redis_queue_conn = None
		site_config = frappe.get_site_config
		try:
			with mock.patch(
				"frappe.get_site_config", lambda *a, **k: frappe._dict({**site_config(*a, **k), "redis_queue": down})
			):
				with self.assertLogs(frappe.logger("btu"), "WARNING") as logged:
					started = time.monotonic()
					log = run_in_this_process(task.name)
					elapsed = time.monotonic() - started
				samples = self.scraped()
		finally:
			background_jobs._redis_queue_conn, frappe.conf.redis_queue = kept, kept_conf
		self.assertEqual(log.status, "Succeeded")
		self.assertLess(elapsed, 1.5)
		self.assertIn("ConnectionError", "\n".join(logged.output))
		self.assertIn("127.0.0.1:1", "\n".join(logged.output))
		# The scrape answers all the same: nothing read, btu_task_outcomes_up 0.
		self.assertEqual(self.value(samples, "btu_task_outcomes_up"), 0)
		self.assertEqual({k for k in samples if k[0] == "btu_task_runs_total"}, set())


class TestScrapeRoles(MetricsCase):
	def test_the_role_is_made_at_migrate(self):
		self.assertTrue(frappe.db.exists("Role", BTU_METRICS_READER_ROLE))
		self.assertEqual(frappe.db.get_value("Role", BTU_METRICS_READER_ROLE, "desk_access"), 0)

	def test_guest_and_a_user_without_the_role_are_refused(self):
		self.user(PLAIN_USER, (PLAIN_ROLE,))
		frappe.set_user("Guest")
		with self.assertRaises(frappe.PermissionError) as caught:
			metrics.scrape()
		self.assertIn("Authorization: token API_KEY:API_SECRET", str(caught.exception))
		frappe.set_user(PLAIN_USER)
		with self.assertRaises(frappe.PermissionError) as caught:
			metrics.scrape()
		self.assertIn(BTU_METRICS_READER_ROLE, str(caught.exception))

	def test_the_reader_and_the_manager_are_served_only_existing_tasks(self):
		task = self.task()
		run_in_this_process(task.name)
		# A Task deleted since its runs: its fields stay in Redis, its series are not served.
		gone = f"BTU-gone-{uuid.uuid4().hex[:6]}"
		self.tasks.append(gone)
		with get_redis_conn().pipeline(transaction=True) as pipe:
			task_outcomes.record(pipe, bench_keys(), frappe.local.site, gone, "Succeeded", 1.0, None, time.time())
			pipe.execute()
		self.user(READER_USER, (BTU_METRICS_READER_ROLE,))
		self.user(MANAGER_USER, ("BTU Manager",))
		for user in (READER_USER, MANAGER_USER):
			samples = self.scraped(user)
			self.assertEqual(self.value(samples, "btu_task_runs_total", task=task.name, status="succeeded"), 1, user)
			self.assertIsNone(self.value(samples, "btu_task_runs_total", task=gone, status="succeeded"), user)


class TestScrapeOverHttp(MetricsCase):
	"""A real HTTP server (werkzeug) running Frappe's WSGI application in a thread, as Prometheus would call it."""

	def setUp(self):
		super().setUp()
		from frappe.app import application
		from werkzeug.serving import make_server

		self.server = make_server("127.0.0.1", 0, application, threaded=False)
		self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
		self.thread.start()

	def tearDown(self):
		self.server.shutdown()
		self.thread.join(10)
		super().tearDown()

	def user_with_keys(self, email, roles) -> str:
		user = self.user(email, roles)
		user.api_key = user.api_key or frappe.generate_hash(length=15)
		secret = frappe.generate_hash(length=15)
		user.api_secret = secret
		user.save(ignore_permissions=True)
		frappe.db.commit()
		return f"{user.api_key}:{secret}"

	def get(self, authorization=None, method="GET"):
		import urllib.error
		import urllib.request

		headers = {
			"X-Frappe-Site-Name": frappe.local.site,
			**({"Authorization": authorization} if authorization else {}),
		}
		request = urllib.request.Request(
			f"http://127.0.0.1:{self.server.server_port}/api/method/{METHOD}", headers=headers, method=method
		)
		try:
			with urllib.request.urlopen(request, timeout=patient(30)) as response:
				return response.status, response.headers["Content-Type"], response.read().decode()
		except urllib.error.HTTPError as error:
			return error.code, error.headers["Content-Type"], error.read().decode()

	def test_prometheus_s_token_header_is_served_and_everyone_else_refused(self):
		task = self.task()
		run_in_this_process(task.name)
		reader = self.user_with_keys(READER_USER, (BTU_METRICS_READER_ROLE,))
		plain = self.user_with_keys(PLAIN_USER, (PLAIN_ROLE,))

		status, content_type, body = self.get(f"token {reader}")
		self.assertEqual((status, content_type), (200, CONTENT_TYPE_LATEST), body[:500])
		samples = samples_of(body)
		self.assertEqual(self.value(samples, "btu_task_runs_total", task=task.name, status="succeeded"), 1)
		self.assertEqual(self.value(samples, "btu_task_outcomes_up"), 1)

		status, _, body = self.get()
		self.assertEqual(status, 403)
		self.assertIn("Authorization: token", body)
		status, _, body = self.get(f"token {plain}")
		self.assertEqual(status, 403)
		self.assertIn(BTU_METRICS_READER_ROLE, body)
		status, _, body = self.get(f"token {reader.split(':')[0]}:wrong-secret")
		self.assertEqual(status, 401)
		self.assertNotIn("btu_task_runs_total", body)
		# GET only: a POST with the reader's key is refused.
		status, _, body = self.get(f"token {reader}", method="POST")
		self.assertEqual(status, 403)
		self.assertNotIn("btu_task_runs_total", body)


class TestMonitor(MetricsCase):
	def setUp(self):
		super().setUp()
		self.kept = frappe.conf.get("monitor")

	def tearDown(self):
		frappe.conf.monitor = self.kept
		if hasattr(frappe.local, "monitor"):
			del frappe.local.monitor
		super().tearDown()

	def test_a_scheduled_run_adds_schedule_slot_and_lags_to_the_monitor_entry(self):
		task = self.task()
		schedule = make_schedule(task.name)
		frappe.db.commit()
		frappe.conf.monitor = 1
		frappe.monitor.start("job", "btu.btu_core.task_runner.run_scheduled_task", {})
		slot = format_utc_iso(utc_now().replace(microsecond=0) - timedelta(seconds=30))
		name = run_scheduled_task(task.name, schedule.name, slot, fire_lag_ms=4.25)
		data = frappe.local.monitor.data.btu
		self.assertEqual(
			{k: data[k] for k in ("task", "log", "status", "schedule", "slot", "fire_lag_ms")},
			{
				"task": task.name,
				"log": name,
				"status": "Succeeded",
				"schedule": schedule.name,
				"slot": slot,
				"fire_lag_ms": 4.25,
			},
		)
		self.assertGreaterEqual(data["start_lag_ms"], 30_000)
		# What Monitor.store writes to the log pipeline (monitor.json.log) holds it.
		self.assertEqual(
			json.loads(json.dumps(frappe.local.monitor.data, default=str))["btu"]["schedule"], schedule.name
		)

	def test_with_the_monitor_off_a_run_adds_nothing(self):
		task = self.task()
		frappe.conf.monitor = 0
		frappe.monitor.start("job", "btu.btu_core.task_runner.run_enqueued_task", {})
		self.assertFalse(hasattr(frappe.local, "monitor"))
		self.assertEqual(run_in_this_process(task.name).status, "Succeeded")
		self.assertFalse(hasattr(frappe.local, "monitor"))
