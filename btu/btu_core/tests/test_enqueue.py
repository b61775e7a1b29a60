"""btu.enqueue_at / enqueue_in / cancel on a real Frappe site: the request a call writes, the run its job makes, the
refusals.

The scheduler's part (firing the request at its millisecond) is tier 1 (tests/engine/test_run_requests.py) and
end to end (test_end_to_end.py). Here a fire is what the scheduler's job calls:
run_scheduled_task(method, "run-request:<name>", slot, fire_at, kind="run-request").
"""

from __future__ import annotations

import time
import uuid
from datetime import datetime, timedelta, timezone

import frappe

import btu
from btu.btu_core import api
from btu.btu_core.doctype.btu_run_request.btu_run_request import delete_expired_run_requests
from btu.btu_core.instants import to_system_naive
from btu.btu_core.runs import enqueue
from btu.btu_core.runs.enqueue import EnqueueError, cancel, enqueue_at, enqueue_in
from btu.btu_core.runs.retries import RunFailed
from btu.btu_core.task_runner import run_scheduled_task
from btu.btu_core.tests.utils import make_user, sealed_value
from btu.shared import run_requests as rr
from btu.shared import task_args
from btu.shared.instants import parse_utc_iso
from btu.shared.run_kind import RunKey, RunKind
from btu.shared.sealed import TABLE

try:
	from frappe.tests import IntegrationTestCase
except ImportError:
	from frappe.tests.utils import FrappeTestCase as IntegrationTestCase

REQUEST = "BTU Run Request"
LOG = "BTU Task Log"
NOTE_CALL = "btu.btu_core.tests.sample_tasks.note_call"
NOTE_USER = "btu.btu_core.tests.sample_tasks.note_user"
SAY_HELLO = "btu.btu_core.tests.sample_tasks.say_hello"


def now() -> datetime:
	return datetime.now(timezone.utc)


def request_key(handle: str) -> str:
	"""The key text the scheduler's job names the request by (as the job's id does)."""
	return RunKey(RunKind.RUN_REQUEST, handle).format()


class EnqueueCase(IntegrationTestCase):
	"""The runner commits, so each test removes the requests it made (and their Logs)."""

	def setUp(self):
		frappe.set_user("Administrator")
		self.marker = uuid.uuid4().hex
		self.made = []

	def tearDown(self):
		frappe.db.rollback()
		frappe.set_user("Administrator")
		for name in self.made:
			frappe.db.delete(LOG, {"run_request": name})
			frappe.db.delete(REQUEST, {"name": name})
		frappe.cache().delete_value(f"btu-test-calls:{self.marker}")
		frappe.db.commit()

	def enqueue(self, *args, **kwargs) -> str:
		handle = enqueue_at(*args, **kwargs)
		self.made.append(handle)
		return handle

	def calls(self) -> list[str]:
		return [
			c.decode() if isinstance(c, bytes) else c
			for c in frappe.cache().lrange(f"btu-test-calls:{self.marker}", 0, -1)
		]

	def fire(self, handle: str, kind: str | None = RunKind.RUN_REQUEST.value):
		"""What the scheduler's job for the request does: the job's return, or what it raised. `kind=None`: a job
		queued by a BTU before run kinds, which named the request by its key's text alone."""
		doc = frappe.get_doc(REQUEST, handle)
		moment = parse_utc_iso(doc.run_at_utc, "run_at_utc")
		try:
			return run_scheduled_task(
				doc.method, request_key(handle), moment.replace(microsecond=0).isoformat(), doc.run_at_utc, kind=kind
			)
		except Exception as exc:
			return exc


class TestEnqueue(EnqueueCase):
	def test_a_call_writes_a_pending_request_to_the_millisecond_and_its_fire_runs_the_function_once(self):
		at = (now() + timedelta(minutes=5)).replace(microsecond=250_400)
		handle = self.enqueue(NOTE_CALL, at, queue="short", timeout=30, marker=self.marker, value="first")
		frappe.db.commit()
		request = frappe.get_doc(REQUEST, handle)
		self.assertEqual(
			(request.status, request.origin, request.method, request.queue, request.timeout),
			("Pending", "Enqueue", NOTE_CALL, "short", 30),
		)
		self.assertEqual(frappe.parse_json(request.kwargs), {"marker": self.marker, "value": "first"})
		# Rounded up to the millisecond: never before the moment asked for.
		self.assertEqual(parse_utc_iso(request.run_at_utc, "run_at_utc"), at.replace(microsecond=251_000))
		self.assertEqual(request.enqueued_by, "Administrator")
		self.assertEqual(self.fire(handle), handle)
		self.assertEqual([c.split()[1] for c in self.calls()], ["first"])
		request.reload()
		self.assertEqual(request.status, "Done")
		self.assertIn("Succeeded in", request.note)
		# A second delivery of the same job (a failover, a redelivery) finds it Done and runs nothing.
		self.assertIsNone(self.fire(handle))
		self.assertEqual(len(self.calls()), 1)

	def test_a_job_queued_before_run_kinds_runs_its_request_once(self):
		handle = self.enqueue(NOTE_CALL, now() + timedelta(minutes=5), marker=self.marker, value="old")
		frappe.db.commit()
		self.assertEqual(self.fire(handle, kind=None), handle)
		self.assertIsNone(self.fire(handle))
		self.assertEqual([c.split()[1] for c in self.calls()], ["old"])
		self.assertEqual(frappe.db.get_value(REQUEST, handle, "status"), "Done")

	def test_the_package_names_the_same_functions(self):
		self.assertIs(btu.enqueue_at, enqueue_at)
		self.assertIs(btu.enqueue_in, enqueue_in)
		self.assertIs(btu.cancel, cancel)

	def test_a_function_object_and_a_naive_time_in_the_site_zone(self):
		from btu.btu_core.tests.sample_tasks import note_call

		at = now() + timedelta(hours=1)
		handle = self.enqueue(note_call, to_system_naive(at), marker=self.marker)
		request = frappe.get_doc(REQUEST, handle)
		self.assertEqual(request.method, NOTE_CALL)
		self.assertEqual(parse_utc_iso(request.run_at_utc, "run_at_utc"), enqueue.instant(at))

	def test_enqueue_in_counts_from_now(self):
		before = now()
		handle = enqueue_in(90.5, NOTE_CALL, marker=self.marker)
		self.made.append(handle)
		run_at = parse_utc_iso(frappe.db.get_value(REQUEST, handle, "run_at_utc"), "run_at_utc")
		self.assertTrue(before + timedelta(seconds=90.5) <= run_at <= now() + timedelta(seconds=90.501), run_at)
		for bad in (-1, float("nan"), float("inf"), "10", True):
			with self.assertRaises(EnqueueError, msg=bad):
				enqueue_in(bad, NOTE_CALL, marker=self.marker)

	def test_the_request_exists_only_if_the_callers_work_commits(self):
		handle = enqueue_at(NOTE_CALL, now() + timedelta(minutes=1), marker=self.marker)
		self.assertTrue(frappe.db.exists(REQUEST, handle))
		frappe.db.rollback()
		self.assertFalse(frappe.db.exists(REQUEST, handle))

	def test_a_job_id_makes_asking_twice_add_nothing(self):
		key = f"invoice-reminder-{self.marker}"
		first = self.enqueue(NOTE_CALL, now() + timedelta(minutes=1), job_id=key, marker=self.marker)
		second = self.enqueue(NOTE_CALL, now() + timedelta(minutes=2), job_id=key, marker=self.marker)
		self.assertEqual(first, second)
		self.assertEqual(frappe.db.count(REQUEST, {"name": first}), 1)
		self.assertNotEqual(first, self.enqueue(NOTE_CALL, now() + timedelta(minutes=1), marker=self.marker))

	def test_cancel_withdraws_a_pending_run_and_says_when_it_could_not(self):
		handle = self.enqueue(NOTE_CALL, now() + timedelta(minutes=1), marker=self.marker)
		frappe.db.commit()
		self.assertTrue(cancel(handle))
		frappe.db.commit()
		self.assertEqual(frappe.db.get_value(REQUEST, handle, "status"), "Cancelled")
		self.assertIsNone(
			self.fire(handle),
			"a cancelled request's job (released before the cancel reached the scheduler) runs nothing",
		)
		self.assertEqual(self.calls(), [])
		self.assertFalse(cancel(handle), "already withdrawn")
		ran = self.enqueue(NOTE_CALL, now(), marker=self.marker)
		frappe.db.commit()
		self.fire(ran)
		self.assertFalse(cancel(ran), "already ran")
		for wrong in ("RR-no-such-handle", "", None):
			with self.assertRaises(EnqueueError) as refused:
				cancel(wrong)
			self.assertIn("pass what enqueue_at returned", str(refused.exception))

	def test_cancel_refuses_another_origins_request(self):
		"""A retry or backfill request is withdrawn from its schedule (cancel_run_request), not through an enqueue
		handle."""
		name = rr.request_name("test", self.marker)
		doc = frappe.get_doc(
			{
				"doctype": REQUEST,
				"name": name,
				"status": "Pending",
				"origin": "Chain",
				"run_at_utc": "2026-01-01T00:00:00Z",
			}
		)
		doc.flags.name_set = True
		doc.flags.ignore_mandatory = True
		doc.insert(ignore_permissions=True)
		self.made.append(name)
		with self.assertRaises(EnqueueError):
			cancel(name)
		self.assertEqual(frappe.db.get_value(REQUEST, name, "status"), "Pending")

	def test_the_note_names_the_fire_lag_and_the_start_lag_apart(self):
		at = now() + timedelta(milliseconds=200)
		handle = self.enqueue(NOTE_CALL, at, marker=self.marker)
		frappe.db.commit()
		doc = frappe.get_doc(REQUEST, handle)
		moment = parse_utc_iso(doc.run_at_utc, "run_at_utc")
		time.sleep(max(0.0, (moment - now()).total_seconds()) + 0.4)
		# Queued 1 ms after its moment, started 400 ms or more after it: a worker that was slow to start the job.
		enqueued = (moment + timedelta(milliseconds=1)).isoformat()
		run_scheduled_task(
			doc.method,
			request_key(handle),
			moment.replace(microsecond=0).isoformat(),
			doc.run_at_utc,
			enqueued,
			kind=RunKind.RUN_REQUEST.value,
		)
		note = frappe.db.get_value(REQUEST, handle, "note")
		self.assertIn("fire lag 1.0 ms (its moment to its job on the queue)", note)
		start_lag = float(note.split("start lag ")[1].split(" ms")[0])
		self.assertGreaterEqual(start_lag, 400, note)
		self.assertLess(start_lag, 60_000, note)

	def test_a_failing_function_fails_its_job_once_and_the_request_says_why(self):
		handle = self.enqueue("btu.btu_core.tests.sample_tasks.maybe_fail", now(), fail=True)
		frappe.db.commit()
		raised = self.fire(handle)
		self.assertIsInstance(raised, RunFailed)
		self.assertIn("RuntimeError", str(raised))
		request = frappe.get_doc(REQUEST, handle)
		self.assertEqual(request.status, "Done")
		self.assertIn("Failed after", request.note)
		self.assertIn("Failed after", request.note)
		self.assertIn("RuntimeError", request.note)
		self.assertNotIn("failing as asked", request.note)  # the Log's sealed result_message holds it
		self.assertIsNone(self.fire(handle))

	def test_a_moment_within_the_grace_runs_now_and_one_beyond_is_refused(self):
		late = self.enqueue(NOTE_CALL, now() - timedelta(seconds=enqueue.GRACE_SECS - 5), marker=self.marker)
		run_at = parse_utc_iso(frappe.db.get_value(REQUEST, late, "run_at_utc"), "run_at_utc")
		self.assertLessEqual(abs((run_at - now()).total_seconds()), 5)
		with self.assertRaises(EnqueueError) as refused:
			enqueue_at(NOTE_CALL, now() - timedelta(seconds=enqueue.GRACE_SECS + 5), marker=self.marker)
		self.assertIn("in the past, beyond the 60 s grace", str(refused.exception))

	def test_each_bad_input_is_refused_by_name_and_writes_nothing(self):
		before = frappe.db.count(REQUEST)
		soon = now() + timedelta(minutes=1)
		cases = [
			(("btu.btu_core.tests.sample_tasks.undeclared_task", soon), {}, "not declared runnable"),
			(("os.system", soon), {"command": "true"}, "is not an installed app"),
			(("frappe.utils.background_jobs.execute_job", soon), {}, "not declared runnable"),
			(("btu.btu_core.tests.sample_tasks.no_such_function", soon), {}, "no attribute"),
			((NOTE_CALL, soon), {}, "marker"),  # a required argument missing
			((NOTE_CALL, soon), {"marker": "m", "colour": "red"}, "colour"),
			((NOTE_CALL, soon), {"marker": datetime(2026, 1, 1)}, "argument marker: datetime cannot be stored as JSON"),
			((NOTE_CALL, soon), {"marker": "x" * (task_args.MAX_ARGUMENTS_CHARS + 1)}, "store the data in a document"),
			((NOTE_CALL, soon), {"marker": "m", "queue": "no-such-queue"}, "queue 'no-such-queue'"),
			((NOTE_CALL, soon), {"marker": "m", "timeout": 0}, "timeout 0"),
			((NOTE_CALL, soon), {"marker": "m", "task_log": "yes"}, "task_log 'yes': give True or False"),
			((NOTE_CALL, soon), {"marker": "m", "task_log": 1}, "task_log 1"),
			((NOTE_CALL, "next tuesday"), {"marker": "m"}, "not an ISO 8601 instant"),
			((NOTE_CALL, 1767225600), {"marker": "m"}, "give a datetime or ISO 8601 text"),
			(
				(NOTE_CALL, now() + timedelta(days=enqueue.MAX_AHEAD_DAYS + 1)),
				{"marker": "m"},
				"use a BTU Task Schedule",
			),
			((42, soon), {}, "give a module-level function or its dotted path"),
		]
		for args, kwargs, expected in cases:
			with self.subTest(args=args[0], kwargs=list(kwargs)):
				with self.assertRaises(EnqueueError) as refused:
					enqueue_at(*args, **kwargs)
				self.assertIn(expected, str(refused.exception))
		self.assertEqual(frappe.db.count(REQUEST), before)

	def test_a_row_naming_an_undeclared_function_runs_nothing(self):
		"""Whoever writes a request row (SQL, a bug) cannot make a worker run code no app declared."""
		handle = self.enqueue(NOTE_CALL, now(), marker=self.marker)
		frappe.db.set_value(REQUEST, handle, "method", "btu.btu_core.tests.sample_tasks.undeclared_task")
		frappe.db.commit()
		raised = self.fire(handle)
		self.assertIsInstance(raised, RunFailed)
		self.assertIn("TaskInputError", str(raised))
		self.assertIn("TaskInputError", frappe.db.get_value(REQUEST, handle, "note"))


class TestEnqueueUser(EnqueueCase):
	"""Issue 32 item 1: an enqueued function ran as Administrator whoever enqueued it. It runs as its caller, as
	frappe.enqueue's job does; only a System Manager (or code running as Administrator) names another user."""

	PLAIN = "btu-enqueue-plain@example.com"
	MANAGER = "btu-enqueue-sysmgr@example.com"

	def setUp(self):
		super().setUp()
		make_user(self.PLAIN)
		make_user(self.MANAGER, ("System Manager",))
		frappe.db.set_value("User", self.PLAIN, "enabled", 1)
		frappe.db.commit()

	def tearDown(self):
		super().tearDown()
		frappe.db.set_value("User", self.PLAIN, "enabled", 1)
		frappe.db.commit()

	def test_a_run_runs_as_the_user_who_enqueued_it_not_administrator(self):
		frappe.set_user(self.PLAIN)
		handle = self.enqueue(NOTE_USER, now(), marker=self.marker)
		frappe.set_user("Administrator")  # the scheduler's job runs as Administrator until the call
		frappe.db.commit()
		self.assertEqual(frappe.db.get_value(REQUEST, handle, ["enqueued_by", "run_as"]), (self.PLAIN, self.PLAIN))
		self.assertEqual(self.fire(handle), handle)
		self.assertEqual(self.calls(), [f"{self.PLAIN} 0"], "the caller's rights: no System Settings")
		self.assertEqual(frappe.session.user, "Administrator", "the job's own user back for what follows the call")

	def test_only_a_system_manager_or_administrator_names_another_user(self):
		frappe.set_user(self.PLAIN)
		with self.assertRaises(frappe.PermissionError) as refused:
			enqueue_at(NOTE_USER, now(), marker=self.marker, as_user="Administrator")
		self.assertIn("only a System Manager may run an enqueued function as another user", str(refused.exception))
		self.assertFalse(frappe.db.sql(f"select 1 from `{TABLE}` where value like %s", f"%{self.marker}%"))
		frappe.set_user(self.MANAGER)
		as_plain = self.enqueue(NOTE_USER, now(), marker=self.marker, as_user=self.PLAIN)
		for unknown in ("nobody@example.com", "", 7):
			with self.assertRaises(EnqueueError, msg=unknown) as refused:
				enqueue_at(NOTE_USER, now(), marker=self.marker, as_user=unknown)
			self.assertIn("as_user", str(refused.exception))
		frappe.set_user("Administrator")
		as_manager = self.enqueue(NOTE_USER, now(), marker=self.marker, as_user=self.MANAGER)
		frappe.db.commit()
		self.assertEqual(frappe.db.get_value(REQUEST, as_plain, ["enqueued_by", "run_as"]), (self.MANAGER, self.PLAIN))
		self.fire(as_plain)
		self.fire(as_manager)
		self.assertEqual(self.calls(), [f"{self.PLAIN} 0", f"{self.MANAGER} 1"])

	def test_a_user_disabled_since_it_was_enqueued_runs_nothing(self):
		frappe.set_user(self.PLAIN)
		handle = self.enqueue(NOTE_USER, now(), marker=self.marker)
		frappe.set_user("Administrator")
		frappe.db.set_value("User", self.PLAIN, "enabled", 0)
		frappe.db.commit()
		self.assertIsNone(self.fire(handle))
		self.assertEqual(self.calls(), [])
		request = frappe.get_doc(REQUEST, handle)
		self.assertEqual(request.status, "Cancelled")
		self.assertIn(f"it runs as {self.PLAIN}, who is no longer an enabled user", request.note)


class TestEnqueueJobIds(EnqueueCase):
	"""Issue 32 item 2: a job_id was one request for ever (the README's reminder could never be scheduled again), any
	call with it got the first one's handle, and anyone could cancel anyone's run."""

	OWNER = "btu-enqueue-owner@example.com"
	OTHER = "btu-enqueue-other@example.com"
	MANAGER = "btu-enqueue-sysmgr@example.com"

	def test_a_job_id_dedupes_only_while_its_request_is_pending(self):
		key = f"reminder-{self.marker}"
		first = self.enqueue(NOTE_CALL, now(), job_id=key, marker=self.marker, value="first")
		self.assertEqual(
			self.enqueue(NOTE_CALL, now() + timedelta(minutes=5), job_id=key, marker=self.marker, value="first"), first
		)
		frappe.db.commit()
		self.fire(first)
		again = self.enqueue(NOTE_CALL, now(), job_id=key, marker=self.marker, value="first")
		self.assertNotEqual(again, first, "the reminder is scheduled again once the first ran")
		self.assertEqual(
			frappe.db.get_value(REQUEST, again, ["status", "job_id", "job_generation"]), ("Pending", f"btu:{key}", 2)
		)
		frappe.db.commit()
		self.fire(again)
		self.assertEqual([call.split()[1] for call in self.calls()], ["first", "first"])
		self.assertTrue(
			cancel(third := self.enqueue(NOTE_CALL, now() + timedelta(minutes=5), job_id=key, marker=self.marker))
		)
		self.assertNotIn(
			self.enqueue(NOTE_CALL, now() + timedelta(minutes=5), job_id=key, marker=self.marker),
			(first, again, third),
			"a cancelled one too",
		)

	def test_the_same_job_id_for_another_call_is_refused_by_name(self):
		key = f"reminder-{self.marker}"
		first = self.enqueue(NOTE_CALL, now() + timedelta(minutes=5), job_id=key, marker=self.marker, value="a")
		for method, kwargs in ((NOTE_CALL, {"value": "b"}), (NOTE_USER, {})):
			with self.subTest(method=method), self.assertRaises(EnqueueError) as refused:
				enqueue_at(method, now() + timedelta(minutes=5), job_id=key, marker=self.marker, **kwargs)
			self.assertIn(f"job_id '{key}': request {first} is pending with it", str(refused.exception))
			self.assertIn(f"cancel {first} first to replace it", str(refused.exception))
		for bad in ("", "   ", 12):
			with self.assertRaises(EnqueueError, msg=bad):
				enqueue_at(NOTE_CALL, now(), job_id=bad, marker=self.marker)

	def test_a_pending_request_past_its_catch_up_window_does_not_hold_its_job_id(self):
		key = f"reminder-{self.marker}"
		stale = self.enqueue(NOTE_CALL, now(), job_id=key, marker=self.marker)
		frappe.db.set_value(REQUEST, stale, "run_at_utc", "2020-01-01T00:00:00Z")
		fresh = self.enqueue(NOTE_CALL, now(), job_id=key, marker=self.marker)
		self.assertNotEqual(fresh, stale)
		self.assertEqual(frappe.db.get_value(REQUEST, stale, "status"), "Cancelled")

	def test_only_the_enqueuer_or_a_system_manager_cancels(self):
		make_user(self.OWNER, ("BTU Manager",))
		make_user(self.OTHER, ("BTU Manager",))
		make_user(self.MANAGER, ("System Manager",))
		frappe.db.commit()
		frappe.set_user(self.OWNER)
		mine = self.enqueue(NOTE_CALL, now() + timedelta(minutes=5), marker=self.marker)
		theirs = self.enqueue(NOTE_CALL, now() + timedelta(minutes=5), marker=self.marker, value="2")
		frappe.db.commit()
		frappe.set_user(self.OTHER)
		with self.assertRaises(frappe.PermissionError):
			cancel(mine)
		with self.assertRaises(frappe.PermissionError):
			api.cancel_run_request(mine)
		self.assertEqual(frappe.db.get_value(REQUEST, mine, "status"), "Pending")
		frappe.set_user(self.OWNER)
		self.assertTrue(cancel(mine))
		frappe.set_user(self.MANAGER)
		self.assertEqual(api.cancel_run_request(theirs)["status"], "Cancelled")

	def test_finished_requests_are_deleted_after_the_log_retention(self):
		retention = frappe.db.get_single_value("BTU Configuration", "log_retention_days")
		frappe.db.set_single_value("BTU Configuration", "log_retention_days", 30)
		try:
			old_done, old_cancelled, old_pending, recent_done = (
				self.enqueue(NOTE_CALL, now() + timedelta(minutes=5), marker=self.marker, value=str(i))
				for i in range(4)
			)
			frappe.db.set_value(REQUEST, old_cancelled, "status", "Cancelled")
			for name in (old_done, recent_done):
				frappe.db.set_value(REQUEST, name, "status", "Done")
			for name in (old_done, old_cancelled, old_pending):
				frappe.db.set_value(
					REQUEST,
					name,
					"modified",
					frappe.utils.add_days(frappe.utils.now_datetime(), -31),
					update_modified=False,
				)
			frappe.db.commit()
			self.assertEqual(delete_expired_run_requests(), 2)
			self.assertEqual(
				sorted(frappe.get_all(REQUEST, filters={"name": ("in", self.made)}, pluck="name")),
				sorted([old_pending, recent_done]),
			)
			frappe.db.set_single_value("BTU Configuration", "log_retention_days", 0)
			frappe.db.set_value(REQUEST, old_pending, "status", "Done", update_modified=False)
			self.assertEqual(delete_expired_run_requests(), 0, "0 keeps them all, as it keeps Logs")
		finally:
			frappe.db.set_single_value("BTU Configuration", "log_retention_days", retention)
			frappe.db.commit()


class TestEnqueueTaskLog(EnqueueCase):
	"""enqueue_at(..., task_log=True): the run writes a BTU Task Log as a Task's run does; without it, none."""

	def logs(self, handle: str) -> list:
		frappe.db.rollback()  # a new snapshot: the runner committed
		names = frappe.get_all(LOG, filters={"run_request": handle}, pluck="name", order_by="creation")
		return [frappe.get_doc(LOG, name) for name in names]  # a Document: its sealed output loaded

	def test_a_logged_run_records_its_output_value_and_links(self):
		handle = self.enqueue(SAY_HELLO, now(), task_log=True, name="ada")
		frappe.db.commit()
		self.assertEqual(frappe.db.get_value(REQUEST, handle, "task_log"), 1)
		self.assertEqual(self.fire(handle), handle)
		[log] = self.logs(handle)
		self.assertEqual(
			(log.status, log.task, log.method, log.task_desc_short, log.origin),
			("Succeeded", None, SAY_HELLO, SAY_HELLO, "Enqueue"),
		)
		self.assertEqual(
			(log.attempt, log.site, log.slot_utc),
			(1, frappe.local.site, frappe.db.get_value(REQUEST, handle, "run_at_utc")),
		)
		self.assertIn("hello ada!", log.stdout)
		self.assertIn("warning for ada", log.stderr)
		self.assertIn("greeted ada", log.logging_output)
		self.assertEqual(frappe.parse_json(log.result_message), {"greeted": "ada"})
		self.assertIsNotNone(log.fire_lag_ms)
		self.assertGreaterEqual(log.execution_time, 0)
		self.assertTrue(log.date_time_started and log.date_time_ended)
		request = frappe.get_doc(REQUEST, handle)
		self.assertEqual((request.status, request.log), ("Done", log.name))
		self.assertIn("Succeeded in", request.note)
		# A second delivery runs nothing and writes no second Log.
		self.assertIsNone(self.fire(handle))
		self.assertEqual(len(self.logs(handle)), 1)

	def test_a_failing_logged_run_keeps_its_traceback_and_loses_its_writes(self):
		handle = self.enqueue(
			"btu.btu_core.tests.sample_tasks.insert_then_fail", now(), task_log=True, marker=self.marker
		)
		frappe.db.commit()
		raised = self.fire(handle)
		self.assertIsInstance(raised, RunFailed)
		self.assertIn("RuntimeError", str(raised))
		[log] = self.logs(handle)
		self.assertEqual(log.status, "Failed")
		self.assertEqual(log.result_message, f"RuntimeError: failing after inserting {self.marker}")
		self.assertIn("Traceback", log.traceback)
		self.assertIn(f"inserted {self.marker}", log.stdout)
		self.assertFalse(
			frappe.db.exists("ToDo", {"description": self.marker}), "the function's own writes are rolled back"
		)
		self.assertIn("Failed after", frappe.db.get_value(REQUEST, handle, "note"))

	def test_a_retry_signal_fails_the_job_once_with_its_log_written(self):
		handle = self.enqueue("btu.btu_core.tests.sample_tasks.signal_retry", now(), task_log=True)
		frappe.db.commit()

		self.assertIsInstance(self.fire(handle), RunFailed)
		[log] = self.logs(handle)
		self.assertEqual(log.status, "Failed")
		self.assertIn("RetryBackgroundJobError", log.result_message)

	def test_without_task_log_no_log_is_written_and_output_is_left_alone(self):
		import contextlib
		import io

		handle = self.enqueue(SAY_HELLO, now(), name="grace")
		frappe.db.commit()
		out, err = io.StringIO(), io.StringIO()
		with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
			self.assertEqual(self.fire(handle), handle)
		self.assertIn("hello grace!", out.getvalue(), "the worker's own output, as before: nothing captured it")
		self.assertIn("warning for grace", err.getvalue())
		self.assertEqual(self.logs(handle), [])
		self.assertFalse(frappe.db.get_value(REQUEST, handle, "log"))

	def test_the_lost_run_sweep_times_out_a_logged_run_whose_worker_died(self):
		from btu.btu_core.runs.lost_runs import mark_lost_runs_timed_out

		handle = self.enqueue(NOTE_CALL, now(), task_log=True, timeout=30, marker=self.marker)
		frappe.db.commit()
		request = frappe.get_doc(REQUEST, handle)
		log = enqueue.start_log(request, enqueue.utc_now(), None, 1.0)  # the worker started it, then died
		frappe.db.commit()
		self.assertNotIn(log, mark_lost_runs_timed_out(), "within its timeout plus the margin: not lost yet")
		frappe.db.set_value(LOG, log, "date_time_started", frappe.utils.now_datetime() - timedelta(seconds=30 + 121))
		# A forged Task-less Log with no request beside it: no timeout to judge it by, so left alone (and no crash).
		forged = frappe.get_doc(
			{
				"doctype": LOG,
				"method": "x.y",
				"status": "Started",
				"date_time_started": frappe.utils.now_datetime() - timedelta(days=1),
			}
		)
		forged.insert(ignore_permissions=True)
		frappe.db.commit()
		try:
			lost = mark_lost_runs_timed_out()
			self.assertIn(log, lost)
			self.assertNotIn(forged.name, lost)
			self.assertEqual(frappe.db.get_value(LOG, log, "status"), "Timed Out")
			self.assertIn("max_task_duration (30 s)", sealed_value(LOG, log, "result_message"))
		finally:
			frappe.db.delete(LOG, {"name": forged.name})
			frappe.db.commit()

	def test_reports_count_enqueued_runs_apart_from_tasks(self):
		from btu.btu_core.report.task_duration_averages import task_duration_averages
		from btu.btu_core.report.task_log_summary import task_log_summary

		handle = self.enqueue(SAY_HELLO, now(), task_log=True, name="reports")
		frappe.db.commit()
		self.fire(handle)
		_columns, rows = task_log_summary.execute({})
		mine = [row for row in rows if row.method == SAY_HELLO]
		self.assertEqual(len(mine), 1)
		self.assertEqual((mine[0].task, mine[0].task_description, mine[0].last_status), (None, SAY_HELLO, "Succeeded"))
		# Per-Task durations leave Task-less Logs out (a None Task beside named ones could not even be sorted).
		_columns, rows, _message, _chart = task_duration_averages.execute({})
		self.assertNotIn(None, [row["task"] for row in rows])
