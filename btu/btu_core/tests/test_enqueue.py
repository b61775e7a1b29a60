"""btu.enqueue_at / enqueue_in / cancel on a real Frappe site: the request a call writes, the run its job makes, the refusals.

The scheduler's part (firing the request at its millisecond) is tier 1 (tests/engine/test_run_requests.py) and
end to end (test_end_to_end.py). Here a fire is what the scheduler's job calls:
run_scheduled_task(method, "run-request:<name>", slot, fire_at).
"""

from __future__ import annotations

import uuid
from datetime import datetime, timedelta, timezone

import frappe

import btu
from btu.btu_core import enqueue
from btu.btu_core.enqueue import EnqueueError, cancel, enqueue_at, enqueue_in
from btu.btu_core.instants import to_system_naive
from btu.btu_core.task_runner import run_scheduled_task
from btu.shared import run_requests as rr
from btu.shared.instants import parse_utc_iso

try:
	from frappe.tests import IntegrationTestCase
except ImportError:
	from frappe.tests.utils import FrappeTestCase as IntegrationTestCase

REQUEST = "BTU Run Request"
NOTE_CALL = "btu.btu_core.tests.sample_tasks.note_call"


def now() -> datetime:
	return datetime.now(timezone.utc)


class TestEnqueue(IntegrationTestCase):
	"""The runner commits, so each test removes the requests it made."""

	def setUp(self):
		frappe.set_user("Administrator")
		self.marker = uuid.uuid4().hex
		self.made = []

	def tearDown(self):
		frappe.db.rollback()
		frappe.set_user("Administrator")
		for name in self.made:
			frappe.db.delete(REQUEST, {"name": name})
		frappe.cache().delete_value(f"btu-test-calls:{self.marker}")
		frappe.db.commit()

	def enqueue(self, *args, **kwargs) -> str:
		handle = enqueue_at(*args, **kwargs)
		self.made.append(handle)
		return handle

	def calls(self) -> list[str]:
		return [c.decode() if isinstance(c, bytes) else c for c in frappe.cache().lrange(f"btu-test-calls:{self.marker}", 0, -1)]

	def fire(self, handle: str):
		"""What the scheduler's job for the request does: the job's return, or what it raised."""
		doc = frappe.get_doc(REQUEST, handle)
		moment = parse_utc_iso(doc.run_at_utc, "run_at_utc")
		try:
			return run_scheduled_task(doc.method, rr.state_name(handle), moment.replace(microsecond=0).isoformat(), doc.run_at_utc)
		except Exception as exc:
			return exc

	def test_a_call_writes_a_pending_request_to_the_millisecond_and_its_fire_runs_the_function_once(self):
		at = (now() + timedelta(minutes=5)).replace(microsecond=250_400)
		handle = self.enqueue(NOTE_CALL, at, queue="short", timeout=30, marker=self.marker, value="first")
		frappe.db.commit()
		request = frappe.get_doc(REQUEST, handle)
		self.assertEqual((request.status, request.origin, request.method, request.queue, request.timeout), ("Pending", "Enqueue", NOTE_CALL, "short", 30))
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
		self.assertIsNone(self.fire(handle), "a cancelled request's job (released before the cancel reached the scheduler) runs nothing")
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
		"""A retry or backfill request is withdrawn from its schedule (cancel_run_request), not through an enqueue handle."""
		name = rr.request_name("test", self.marker)
		doc = frappe.get_doc({"doctype": REQUEST, "name": name, "status": "Pending", "origin": "Chain", "run_at_utc": "2026-01-01T00:00:00Z"})
		doc.flags.name_set = True
		doc.flags.ignore_mandatory = True
		doc.insert(ignore_permissions=True)
		self.made.append(name)
		with self.assertRaises(EnqueueError):
			cancel(name)
		self.assertEqual(frappe.db.get_value(REQUEST, name, "status"), "Pending")

	def test_a_failing_function_fails_its_job_once_and_the_request_says_why(self):
		handle = self.enqueue("btu.btu_core.tests.sample_tasks.maybe_fail", now(), fail=True)
		frappe.db.commit()
		raised = self.fire(handle)
		self.assertIsInstance(raised, RuntimeError)
		request = frappe.get_doc(REQUEST, handle)
		self.assertEqual(request.status, "Done")
		self.assertIn("Failed after", request.note)
		self.assertIn("RuntimeError: failing as asked", request.note)
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
			((NOTE_CALL, soon), {"marker": "x" * (enqueue.MAX_KWARGS_CHARS + 1)}, "store the data in a document"),
			((NOTE_CALL, soon), {"marker": "m", "queue": "no-such-queue"}, "queue 'no-such-queue'"),
			((NOTE_CALL, soon), {"marker": "m", "timeout": 0}, "timeout 0"),
			((NOTE_CALL, "next tuesday"), {"marker": "m"}, "not an ISO 8601 instant"),
			((NOTE_CALL, 1767225600), {"marker": "m"}, "give a datetime or ISO 8601 text"),
			((NOTE_CALL, now() + timedelta(days=enqueue.MAX_AHEAD_DAYS + 1)), {"marker": "m"}, "use a BTU Task Schedule"),
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
		self.assertIn("not declared runnable", str(raised))
		self.assertIn("not declared runnable", frappe.db.get_value(REQUEST, handle, "note"))
