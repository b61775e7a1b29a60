"""Retries, backfill and chains on a real Frappe site: the requests the Frappe side writes and the runs the task runner
makes of them (the scheduler's part, firing a pending request once, is tier 1: tests/engine/test_run_requests.py).

A request's fire is what the scheduler's job calls: run_scheduled_task(task, "run-request:<name>", run_at,
kind="run-request").
"""

from __future__ import annotations

import json
import threading
import time
import uuid
from datetime import datetime, timedelta, timezone
from unittest import mock

import frappe

from btu.btu_core import api
from btu.btu_core.instants import from_system_naive
from btu.btu_core.report.scheduled_task_summary import scheduled_task_summary
from btu.btu_core.runs.retries import RunFailed
from btu.btu_core.runs.task_run import run_in_this_process
from btu.btu_core.schedules.preview import next_fires, render_html
from btu.btu_core.task_runner import run_scheduled_task
from btu.btu_core.tests.utils import delete_committed, make_schedule, make_task, make_user, sealed_value
from btu.shared import run_requests as rr
from btu.shared.instants import format_utc_iso, parse_utc_iso
from btu.shared.run_kind import RunKey, RunKind

try:
	from frappe.tests import IntegrationTestCase
except ImportError:
	from frappe.tests.utils import FrappeTestCase as IntegrationTestCase

REQUEST = "BTU Run Request"


def utc(text: str) -> datetime:
	return parse_utc_iso(text, "test")


def hour_floor(moment: datetime) -> datetime:
	return moment.replace(minute=0, second=0, microsecond=0)


class RunRequestCase(IntegrationTestCase):
	"""The runner commits, so each test removes what it made."""

	def setUp(self):
		self.tasks = []
		frappe.set_user("Administrator")

	def tearDown(self):
		frappe.set_user("Administrator")
		for task in reversed(self.tasks):
			delete_committed(task)

	def task(self, function="say_hello", **values):
		task = make_task(function, **values)
		self.tasks.append(task.name)
		frappe.db.commit()
		return task

	def fire(self, request: str):
		"""What the scheduler's job for the request does; the Log name, or the exception the run raised."""
		doc = frappe.get_doc(REQUEST, request)
		try:
			return run_scheduled_task(
				doc.task, RunKey(RunKind.RUN_REQUEST, request).format(), doc.run_at_utc, kind=RunKind.RUN_REQUEST.value
			)
		except Exception as exc:  # the runner re-raises a failure so RQ marks the job failed
			return exc

	def request(self, name: str):
		return frappe.get_doc(REQUEST, name)


class TestRetries(RunRequestCase):
	def flaky(self, failures: int, **retry):
		marker = uuid.uuid4().hex
		return self.task("flaky", arguments=json.dumps({"marker": marker, "failures": failures}), **retry)

	def test_each_attempt_has_its_log_linked_to_the_first_until_the_last(self):
		task = self.task(
			"maybe_fail", max_attempts=3, retry_delay_secs=10, retry_backoff_factor=2, retry_max_delay_secs=15
		)
		schedule = make_schedule(task.name)
		frappe.db.commit()
		slot = "2026-11-24T02:30:00Z"
		with self.assertRaises(RunFailed):
			run_scheduled_task(task.name, schedule.name, slot)
		[first] = [
			frappe.get_doc("BTU Task Log", n) for n in frappe.get_all("BTU Task Log", {"task": task.name}, pluck="name")
		]
		self.assertEqual((first.attempt, first.retried, first.origin or None), (1, 1, None))
		second = rr.slot_request_name(schedule.name, utc(slot), 2)
		self.assertIn("attempt 2 at", first.logging_output)
		request = self.request(second)
		self.assertEqual(
			(request.status, request.origin, request.attempt, request.slot_utc), ("Pending", "Retry", 2, slot)
		)
		self.assertEqual(
			(request.parent_log, request.first_log, request.schedule), (first.name, first.name, schedule.name)
		)
		delay = (utc(request.run_at_utc) - datetime.now(timezone.utc)).total_seconds()
		self.assertTrue(9 <= delay <= 11.1, delay)

		self.assertIsInstance(self.fire(second), RunFailed)
		log2 = frappe.get_doc("BTU Task Log", self.request(second).log)
		self.assertEqual(
			(log2.attempt, log2.origin, log2.first_attempt_log, log2.parent_log, log2.run_request),
			(2, "Retry", first.name, first.name, second),
		)
		self.assertEqual((log2.slot_utc, log2.schedule, log2.retried), (slot, schedule.name, 1))
		self.assertEqual(self.request(second).status, "Done")
		third = rr.slot_request_name(schedule.name, utc(slot), 3)
		delay = (utc(self.request(third).run_at_utc) - datetime.now(timezone.utc)).total_seconds()
		self.assertTrue(14 <= delay <= 16.1, f"10 * 2 capped at 15 s, whole seconds: {delay}")
		self.assertEqual(self.request(third).first_log, first.name)

		# A second delivery of attempt 2's job (a failover) finds its Log: no run, no new request.
		self.assertEqual(self.fire(second), log2.name)
		self.assertIsInstance(self.fire(third), RunFailed)
		log3 = frappe.get_doc("BTU Task Log", self.request(third).log)
		self.assertEqual((log3.attempt, log3.retried), (3, 0))
		self.assertIn("Attempt 3 of 3: no retry left.", log3.logging_output)
		self.assertFalse(frappe.db.exists(REQUEST, rr.slot_request_name(schedule.name, utc(slot), 4)))
		self.assertEqual(frappe.db.count("BTU Task Log", {"task": task.name}), 3)
		# Only the last attempt is a failure of the schedule.
		self.assertEqual(frappe.db.get_value("BTU Task Schedule", schedule.name, "failure_streak"), 1)

	def test_a_retry_waits_its_delay_from_the_failed_attempts_end_to_the_millisecond(self):
		task = self.task("maybe_fail", max_attempts=2, retry_delay_secs=2)
		schedule = make_schedule(task.name)
		frappe.db.commit()
		# Start 50 ms into a second: a run_at rounded to whole seconds would land up to 950 ms late, past the bound
		# below.
		time.sleep((1.05 - datetime.now(timezone.utc).microsecond / 1e6) % 1)
		before = datetime.now(timezone.utc)
		with self.assertRaises(RunFailed):
			run_scheduled_task(task.name, schedule.name, "2026-11-24T02:30:00Z")
		after = datetime.now(timezone.utc)
		[failed] = frappe.get_all("BTU Task Log", filters={"task": task.name}, fields=["date_time_ended"])
		[request] = frappe.get_all(REQUEST, filters={"task": task.name, "origin": "Retry"}, fields=["run_at_utc"])
		run_at = utc(request.run_at_utc)
		self.assertTrue(
			before + timedelta(seconds=2) <= run_at <= after + timedelta(seconds=2, milliseconds=1),
			(before, run_at, after),
		)
		waited = (run_at - from_system_naive(failed.date_time_ended)).total_seconds()
		self.assertTrue(2 <= waited < 2.1, f"2 s from the failed attempt's Date Time Ended, not rounded: {waited}")

	def test_a_retry_that_succeeds_ends_the_attempts(self):
		task = self.flaky(1, max_attempts=5, retry_delay_secs=1)
		schedule = make_schedule(task.name)
		frappe.db.commit()
		slot = "2026-11-24T03:00:00Z"
		with self.assertRaises(RunFailed):
			run_scheduled_task(task.name, schedule.name, slot)
		second = rr.slot_request_name(schedule.name, utc(slot), 2)
		log = self.fire(second)
		self.assertEqual(frappe.db.get_value("BTU Task Log", log, "status"), "Succeeded")
		self.assertFalse(frappe.db.exists(REQUEST, rr.slot_request_name(schedule.name, utc(slot), 3)))
		self.assertEqual(frappe.db.get_value("BTU Task Schedule", schedule.name, "failure_streak"), 0)

	def test_retry_on_chooses_which_failures_retry(self):
		cases = {
			"Timeout": ("maybe_fail", False),
			"Retry Signal": ("maybe_fail", False),
			"Any Failure": ("maybe_fail", True),
		}
		for retry_on, (function, retried) in cases.items():
			with self.subTest(retry_on=retry_on):
				task = self.task(function, max_attempts=2, retry_on=retry_on)
				schedule = make_schedule(task.name)
				frappe.db.commit()
				with self.assertRaises(RunFailed):
					run_scheduled_task(task.name, schedule.name, "2026-11-24T04:00:00Z")
				self.assertEqual(bool(frappe.db.exists(REQUEST, {"schedule": schedule.name})), retried)
		# Frappe's own retry signal is retried under Retry Signal, and is not re-raised as itself: Frappe's execute_job
		# would otherwise run the job again in-process five times.
		task = self.task("signal_retry", max_attempts=2, retry_on="Retry Signal", retry_delay_secs=1)
		schedule = make_schedule(task.name)
		frappe.db.commit()
		with self.assertRaises(RunFailed):
			run_scheduled_task(task.name, schedule.name, "2026-11-24T04:00:00Z")
		self.assertTrue(frappe.db.exists(REQUEST, {"schedule": schedule.name, "attempt": 2}))

	def test_a_schedule_overrides_the_tasks_policy(self):
		task = self.task("maybe_fail", max_attempts=5, retry_delay_secs=1)
		schedule = make_schedule(task.name, max_attempts=1)
		frappe.db.commit()
		with self.assertRaises(RunFailed):
			run_scheduled_task(task.name, schedule.name, "2026-11-24T05:00:00Z")
		self.assertFalse(frappe.db.exists(REQUEST, {"schedule": schedule.name}))
		schedule.max_attempts = 3
		schedule.retry_delay_secs = 30
		schedule.save()
		frappe.db.commit()
		with self.assertRaises(RunFailed):
			run_scheduled_task(task.name, schedule.name, "2026-11-24T05:30:00Z")
		request = frappe.get_doc(REQUEST, {"schedule": schedule.name})
		self.assertEqual(request.attempt, 2)
		self.assertGreater((utc(request.run_at_utc) - datetime.now(timezone.utc)).total_seconds(), 25)

	def test_no_retry_at_or_after_the_next_slot_under_overlap_skip(self):
		task = self.task("maybe_fail", max_attempts=3, retry_delay_secs=3600)
		skip = make_schedule(task.name, run_frequency="Cron Style", cron_string="*/5 * * * *", overlap_policy="skip")
		allow = make_schedule(task.name, run_frequency="Cron Style", cron_string="*/5 * * * *", overlap_policy="allow")
		frappe.db.commit()
		slot = format_utc_iso(datetime.now(timezone.utc).replace(second=0, microsecond=0))
		for schedule in (skip, allow):
			with self.assertRaises(RunFailed):
				run_scheduled_task(task.name, schedule.name, slot)
		self.assertFalse(frappe.db.exists(REQUEST, {"schedule": skip.name}))
		note = sealed_value(
			"BTU Task Log", frappe.db.get_value("BTU Task Log", {"schedule": skip.name}), "logging_output"
		)
		self.assertIn("Not retried: attempt 2 would start", note)
		self.assertIn("overlap_policy skip", note)
		self.assertTrue(frappe.db.exists(REQUEST, {"schedule": allow.name}))

	def test_run_now_is_not_retried_and_says_so(self):
		task = self.task("maybe_fail", max_attempts=3)
		log = run_in_this_process(task.name)
		self.assertEqual(log.status, "Failed")
		self.assertIn("Not retried", sealed_value("BTU Task Log", log.name, "logging_output"))
		self.assertFalse(frappe.db.exists(REQUEST, {"task": task.name}))

	def test_bounds_are_refused_with_the_field_named(self):
		for values, text in (
			({"max_attempts": 101}, "Max Attempts"),
			({"retry_backoff_factor": 50}, "Backoff Factor"),
			({"retry_delay_secs": -1}, "First Retry After"),
			({"retry_on": "Sometimes"}, "Retry On"),
		):
			with self.subTest(values=values):
				with self.assertRaises(frappe.ValidationError) as caught:
					self.task("maybe_fail", **values)
				self.assertIn(text, str(caught.exception))
				frappe.db.rollback()


class TestBackfill(RunRequestCase):
	def hourly(self, **values):
		task = self.task()
		schedule = make_schedule(task.name, run_frequency="Hourly", minute=0, **values)
		frappe.db.commit()
		return task, schedule

	def test_backfill_runs_each_slot_without_a_log_once_one_at_a_time(self):
		task, schedule = self.hourly()
		top = hour_floor(datetime.now(timezone.utc))
		start, end = top - timedelta(hours=6), top - timedelta(hours=1)
		slots = [format_utc_iso(start + timedelta(hours=i)) for i in range(6)]
		run_scheduled_task(task.name, schedule.name, slots[2])  # this slot ran: not backfilled
		result = api.backfill(schedule.name, format_utc_iso(start), format_utc_iso(end))
		frappe.db.commit()
		self.assertEqual((result["slots"], result["already_ran"]), (6, [slots[2]]))
		self.assertEqual(len(result["requested"]), 5)
		statuses = [self.request(name).status for name in result["requested"]]
		self.assertEqual(statuses, ["Pending", "Waiting", "Waiting", "Waiting", "Waiting"])
		# The form's preview and the summary report show them.
		preview = next_fires(schedule, 3)
		self.assertEqual([run.status for run in preview["pending_runs"]], statuses)
		self.assertIn("btu-pending-runs", render_html(preview))
		self.assertEqual(self.summary(schedule)["pending_runs"], 5)
		# Asked again (a double click, a second admin): nothing new.
		again = api.backfill(schedule.name, format_utc_iso(start), format_utc_iso(end))
		frappe.db.commit()
		self.assertEqual((again["requested"], sorted(again["already_requested"])), ([], sorted(result["requested"])))
		for name in result["requested"]:
			self.assertEqual(self.request(name).status, "Pending", "the one before ran, so this one is due")
			log = frappe.get_doc("BTU Task Log", self.fire(name))
			self.assertEqual((log.origin, log.schedule, log.run_request), ("Backfill", schedule.name, name))
			self.assertEqual(self.fire(name), log.name, "its job delivered again runs nothing")
		logged = frappe.get_all("BTU Task Log", filters={"schedule": schedule.name}, pluck="slot_utc")
		self.assertEqual(sorted(logged), slots)
		row = self.summary(schedule)
		self.assertEqual((row["backfilled_24h"], row["pending_runs"], row["runs_24h"]), (5, 0, 6))

	def summary(self, schedule) -> dict:
		_columns, rows = scheduled_task_summary.execute({"task": schedule.task})
		return next(row for row in rows if row["schedule"] == schedule.name)

	def test_all_at_once_and_cancel(self):
		task, schedule = self.hourly()
		top = hour_floor(datetime.now(timezone.utc))
		result = api.backfill(
			schedule.name,
			format_utc_iso(top - timedelta(hours=3)),
			format_utc_iso(top - timedelta(hours=1)),
			one_at_a_time=0,
		)
		frappe.db.commit()
		self.assertEqual([self.request(n).status for n in result["requested"]], ["Pending"] * 3)
		serial = self.hourly()[1]
		chain = api.backfill(
			serial.name, format_utc_iso(top - timedelta(hours=3)), format_utc_iso(top - timedelta(hours=1))
		)
		api.cancel_run_request(chain["requested"][0])
		frappe.db.commit()
		self.assertEqual(
			[self.request(n).status for n in chain["requested"]], ["Cancelled"] * 3, "the waiting ones go with it"
		)
		self.assertIsNone(self.fire(chain["requested"][0]), "a cancelled request's job runs nothing")
		self.assertFalse(frappe.db.exists("BTU Task Log", {"schedule": serial.name}))
		with self.assertRaises(frappe.ValidationError):
			api.cancel_run_request(chain["requested"][0])

	def test_refusals_name_the_bound_and_the_input(self):
		task = self.task()
		every_second = make_schedule(task.name, run_frequency="Cron Style", cron_string="* * * * * *")
		frappe.db.commit()
		now = datetime.now(timezone.utc)
		cases = (
			(every_second.name, now - timedelta(hours=1), now - timedelta(minutes=1), "more than 1000 slots"),
			(every_second.name, now - timedelta(minutes=1), now + timedelta(minutes=1), "in the future"),
			(every_second.name, now - timedelta(minutes=1), now - timedelta(minutes=2), "is not after start"),
		)
		for schedule, start, end, text in cases:
			with self.subTest(text=text):
				with self.assertRaises(frappe.ValidationError) as caught:
					api.backfill(schedule, format_utc_iso(start), format_utc_iso(end))
				self.assertIn(text, str(caught.exception))
		with self.assertRaises(frappe.ValidationError) as caught:
			api.backfill(every_second.name, "yesterday-ish", format_utc_iso(now))
		self.assertIn("start 'yesterday-ish'", str(caught.exception))
		self.assertFalse(
			frappe.db.exists(REQUEST, {"schedule": every_second.name}), "a refused backfill requests nothing"
		)

	def test_roles(self):
		task, schedule = self.hourly()
		make_user("btu-backfill-plain@example.com")
		frappe.db.commit()
		frappe.set_user("btu-backfill-plain@example.com")
		top = hour_floor(datetime.now(timezone.utc))
		with self.assertRaises(frappe.PermissionError):
			api.backfill(
				schedule.name, format_utc_iso(top - timedelta(hours=2)), format_utc_iso(top - timedelta(hours=1))
			)
		with self.assertRaises(frappe.PermissionError):
			api.pending_runs()


class TestChains(RunRequestCase):
	def test_a_run_starts_its_chained_tasks_by_outcome_with_the_parent_linked(self):
		on_success = self.task()
		on_failure = self.task()
		parent = self.task("maybe_fail", arguments='{"fail": false}')
		api.set_chained_tasks(
			parent.name,
			json.dumps(
				[
					{"next_task": on_success.name, "on_outcome": "Success"},
					{"next_task": on_failure.name, "on_outcome": "Failure", "delay_secs": 30},
				]
			),
		)
		frappe.db.commit()
		log = run_in_this_process(parent.name)
		self.assertEqual(log.status, "Succeeded")
		requests = frappe.get_all(
			REQUEST, filters={"parent_log": log.name}, fields=["name", "task", "origin", "status"]
		)
		self.assertEqual([(r.task, r.origin, r.status) for r in requests], [(on_success.name, "Chain", "Pending")])
		child = frappe.get_doc("BTU Task Log", self.fire(requests[0].name))
		self.assertEqual(
			(child.task, child.parent_log, child.origin, child.status),
			(on_success.name, log.name, "Chain", "Succeeded"),
		)
		self.assertEqual(self.fire(requests[0].name), child.name, "a second delivery runs nothing")
		self.assertEqual(frappe.db.count("BTU Task Log", {"task": on_success.name}), 1)

		frappe.db.set_value("BTU Task", parent.name, "arguments", '{"fail": true}')
		frappe.db.commit()
		failed = run_in_this_process(parent.name)
		[request] = frappe.get_all(REQUEST, filters={"parent_log": failed.name}, fields=["task", "run_at_utc"])
		self.assertEqual(request.task, on_failure.name)
		self.assertGreater((utc(request.run_at_utc) - datetime.now(timezone.utc)).total_seconds(), 25)

	def test_a_retried_chained_run_keeps_its_lineage(self):
		child = self.task("maybe_fail", max_attempts=2, retry_delay_secs=1)
		parent = self.task(chained_tasks=[{"next_task": child.name, "on_outcome": "Success"}])
		log = run_in_this_process(parent.name)
		first = rr.chain_request_name(log.name, child.name)
		self.assertIsInstance(self.fire(first), RunFailed)
		retry = rr.chain_request_name(log.name, child.name, 2)
		self.assertEqual(self.request(retry).origin, "Retry")
		self.assertIsInstance(self.fire(retry), RunFailed)
		logs = frappe.get_all(
			"BTU Task Log",
			filters={"task": child.name},
			fields=["attempt", "first_attempt_log", "run_request"],
			order_by="attempt",
		)
		self.assertEqual([l.attempt for l in logs], [1, 2])
		self.assertEqual(logs[1].first_attempt_log, frappe.db.get_value(REQUEST, first, "log"))

	def test_cycles_are_refused_on_save(self):
		a = self.task()
		b = self.task(chained_tasks=[{"next_task": a.name, "on_outcome": "Any"}])
		a.reload()
		a.append("chained_tasks", {"next_task": b.name, "on_outcome": "Success"})
		with self.assertRaises(frappe.ValidationError) as caught:
			a.save()
		self.assertIn(f"{a.name} -> {b.name} -> {a.name}", str(caught.exception))
		a.reload()
		a.append("chained_tasks", {"next_task": a.name, "on_outcome": "Failure"})
		with self.assertRaises(frappe.ValidationError):
			a.save()
		with self.assertRaises(frappe.ValidationError):
			api.set_chained_tasks(a.name, [{"next_task": "no such task"}])


class TestChainBounds(RunRequestCase):
	"""Issue 32 item 3: chains could loop or explode. A cycle written past the save's check (or closed by two saves at
	once) ran for ever, and Tasks each chained to every later one made one run start 2^(n-2) runs of the last."""

	def link(self, parent: str, *children: str):
		"""Chained rows written as SQL writes them, past BTU Task's validation (what a race or a bug leaves)."""
		for child in children:
			row = frappe.get_doc(
				{
					"doctype": "BTU Chained Task",
					"parent": parent,
					"parenttype": "BTU Task",
					"parentfield": "chained_tasks",
					"next_task": child,
					"on_outcome": "Any",
				}
			)
			row.db_insert()
		frappe.db.commit()

	def run_chain(self, root_task: str, most: int) -> tuple[str, list[str]]:
		"""Run `root_task`, then fire its chain's requests until none is pending (at most `most`): its Log and the
		Logs."""
		root = run_in_this_process(root_task)
		logs = []
		for _ in range(most):
			pending = frappe.get_all(
				REQUEST,
				filters={"origin": "Chain", "status": "Pending", "task": ("in", self.tasks)},
				pluck="name",
				order_by="creation",
			)
			if not pending:
				break
			logs += [self.fire(name) for name in pending]
		return root.name, logs

	def test_a_cycle_stops_at_the_deepest_link_and_its_last_log_says_why(self):
		a, b = self.task(), self.task()
		self.link(a.name, b.name)
		self.link(b.name, a.name)
		with mock.patch.object(rr, "MAX_CHAIN_DEPTH", 3):
			root, logs = self.run_chain(a.name, 10)
		chained = frappe.get_all(
			REQUEST,
			filters={"origin": "Chain", "task": ("in", self.tasks)},
			fields=["chain_root", "chain_depth"],
			order_by="chain_depth",
		)
		self.assertEqual([(r.chain_root, r.chain_depth) for r in chained], [(root, 1), (root, 2), (root, 3)])
		last = frappe.get_doc("BTU Task Log", logs[-1])
		self.assertIn(
			f"not started: this run is 3 links from the chain's first run {root}, the most a chain may have (3)",
			last.logging_output,
		)

	def test_a_doubling_fan_out_stops_at_the_runs_one_root_may_start(self):
		a, b, c = self.task(), self.task(), self.task()
		for parent in (a, b, c):
			self.link(parent.name, b.name, c.name)
		with mock.patch.object(rr, "MAX_CHAIN_RUNS", 5):
			root, logs = self.run_chain(a.name, 10)
		self.assertEqual(frappe.db.count(REQUEST, {"chain_root": root, "origin": "Chain"}), 5)
		self.assertEqual(frappe.db.count(REQUEST, {"origin": "Chain", "task": ("in", self.tasks)}), 5)
		notes = [sealed_value("BTU Task Log", log, "logging_output") or "" for log in logs]
		self.assertTrue(
			any(
				f"the chain of the run {root} has started 5 runs, the most one run's chain may start (5)" in note
				for note in notes
			),
			notes,
		)

	def test_a_task_chains_at_most_a_bounded_number_of_tasks(self):
		parent, child = self.task(), self.task()
		with self.assertRaises(frappe.ValidationError) as refused:
			api.set_chained_tasks(parent.name, [{"next_task": child.name}] * (rr.MAX_CHAINED_TASKS + 1))
		self.assertIn(f"{rr.MAX_CHAINED_TASKS + 1} rows, more than {rr.MAX_CHAINED_TASKS}", str(refused.exception))
		api.set_chained_tasks(parent.name, [{"next_task": child.name}] * rr.MAX_CHAINED_TASKS)

	def test_two_saves_closing_a_cycle_at_once_cannot_both_pass(self):
		a, b = self.task(), self.task()
		site, sites_path = frappe.local.site, frappe.local.sites_path
		outcome = {}

		def save_b_to_a():
			frappe.init(site=site, sites_path=sites_path)
			frappe.connect()
			frappe.set_user("Administrator")
			try:
				doc = frappe.get_doc("BTU Task", b.name)
				doc.append("chained_tasks", {"next_task": a.name, "on_outcome": "Success"})
				doc.save()
				frappe.db.commit()
				outcome["saved"] = True
			except frappe.ValidationError as exc:
				outcome["refused"] = str(exc)
				frappe.db.rollback()
			finally:
				frappe.destroy()

		a.reload()
		a.append("chained_tasks", {"next_task": b.name, "on_outcome": "Success"})
		a.save()  # not committed yet: its chain lock is held
		other = threading.Thread(target=save_b_to_a)
		other.start()
		try:
			other.join(2)
			self.assertTrue(other.is_alive(), f"B -> A did not wait for A -> B to commit: {outcome}")
		finally:
			frappe.db.commit()
			other.join(60)
		self.assertIn(f"{b.name} -> {a.name} -> {b.name}", outcome.get("refused", ""), outcome)
		self.assertEqual(frappe.get_all("BTU Chained Task", filters={"parent": b.name}), [])
