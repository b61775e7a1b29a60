"""A saved schedule's buttons in a real browser: Pause and Resume, Skip Next Run and its Undo, Backfill, Run Now,
Next Fires, Recent Runs and Pending Runs; what each person sees from them."""

from __future__ import annotations

import re
import time
from datetime import datetime, timedelta

import frappe
from frappe.utils.background_jobs import get_redis_conn
from rq.job import Job
from selenium.webdriver.common.by import By

from btu.btu_core.instants import system_now, utc_now
from btu.btu_core.tests.desk import forms, records
from btu.btu_core.tests.desk import schedule_steps as steps
from btu.btu_core.tests.desk.case import DeskTestCase
from btu.btu_core.tests.desk.people import Person
from btu.btu_core.tests.utils import patient

SYSTEM_ZONE = "America/New_York"
PAUSED = "This schedule is paused: these fires will not happen until it is resumed."


def withdraw_job(job_id: str) -> None:
	"""Take a Run Now job off its queue before its Task goes; one a worker took already is waited for (a bench with
	workers runs it: its Log goes with the Task)."""
	job = Job.fetch(job_id, connection=get_redis_conn())
	if job.get_status(refresh=True) == "queued":
		job.cancel()
	deadline = time.monotonic() + patient(60)
	while job.get_status(refresh=True) == "started" and time.monotonic() < deadline:
		time.sleep(0.2)
	job.delete()


class TestScheduleActions(DeskTestCase):
	def setUp(self):
		super().setUp()
		self.label = records.unique("Desk actions")
		self.task = records.committed_task(self, desc_short=self.label)
		self.schedule = steps.make_schedule(self.task)

	def stored(self, *fields: str):
		frappe.db.rollback()
		return tuple(frappe.db.get_value("BTU Task Schedule", self.schedule, list(fields)))

	def test_pause_with_a_note_and_resume(self):
		for person in (Person.BTU_MANAGER, Person.SYSTEM_MANAGER):
			with self.subTest(person=person.name):
				browser = self.as_person(person)
				steps.open_saved(browser, self.schedule)
				browser.click_button("Pause")
				forms.dialog_titled(browser, f"Pause {self.schedule}")
				browser.fill("note", "Desk test: the supplier's API is down")
				forms.dialog_primary(browser)
				browser.button("Resume")
				browser.wait(lambda: PAUSED in steps.preview_text(browser), "the preview saying it is paused")
				self.assertEqual(forms.headline(browser), "Paused: Desk test: the supplier's API is down")
				browser.screenshot("schedule-paused")
				self.assertEqual(self.stored("paused", "pause_note"), (1, "Desk test: the supplier's API is down"))

				browser.click_button("Resume")
				browser.button("Pause")
				browser.wait(lambda: PAUSED not in steps.preview_text(browser), "the preview without the pause")
				self.assertEqual(forms.headline(browser), "")
				self.assertEqual(self.stored("paused", "pause_note"), (0, None))

	def test_skip_the_next_two_runs_and_undo_one(self):
		# Its runs half a day from now: the next run is still the next one when the skip reaches the server.
		self.schedule = steps.make_schedule(self.task, hour=(utc_now().hour + 12) % 24)
		browser = self.as_person(Person.BTU_MANAGER)
		steps.open_saved(browser, self.schedule)
		first, second, third = (row[1] for row in steps.preview_rows(browser)[:3])
		browser.click_button("Skip Next Run", group="Skip")
		forms.dialog_titled(browser, f"Skip the next runs of {self.schedule}")
		browser.fill("count", "2")
		forms.dialog_primary(browser)
		browser.wait(lambda: steps.preview_rows(browser)[0][4] == "skipped", "the first run marked skipped")
		rows = steps.preview_rows(browser)
		self.assertEqual([row[:2] + row[4:] for row in rows[:3]],
			[["", first, "skipped"], ["", second, "skipped"], ["1", third, ""]])  # fmt: skip
		self.assertEqual(len(self.stored_skips()), 2)
		browser.screenshot("schedule-skipped")

		browser.click_button(f"Undo skip of {first}", group="Skip")
		browser.wait(lambda: steps.preview_rows(browser)[0][4] == "", "the first run back")
		rows = steps.preview_rows(browser)
		self.assertEqual([row[:2] + row[4:] for row in rows[:3]],
			[["1", first, ""], ["", second, "skipped"], ["2", third, ""]])  # fmt: skip
		browser.click_button("Skip")
		browser.button(f"Undo skip of {second}")
		self.assertFalse(browser.all_displayed(By.XPATH, f"//a[normalize-space()='Undo skip of {first}']"))
		self.assertEqual(len(self.stored_skips()), 1)

	def stored_skips(self) -> list[str]:
		frappe.db.rollback()
		return frappe.get_all("BTU Skipped Slot", filters={"parent": self.schedule}, pluck="slot_utc")

	def test_backfill_a_past_range(self):
		browser = self.as_person(Person.BTU_MANAGER)
		steps.open_saved(browser, self.schedule)
		browser.click_button("Backfill", group="Actions")
		forms.dialog_titled(browser, f"Backfill {self.schedule}")
		# Ten days ago from midnight, three days long: three of the 02:30 UTC slots, whichever the zone's offset.
		start = datetime.combine(system_now().date() - timedelta(days=10), datetime.min.time())
		forms.fill_datetime(browser, "start", start)
		forms.fill_datetime(browser, "end", start + timedelta(days=3))
		forms.dialog_primary(browser)
		text = forms.dialog_titled(browser, f"Backfill of {self.schedule}")
		self.assertIn("3 slots in the range: 3 requested, 0 requested before, 0 ran already.", text)
		browser.screenshot("schedule-backfill-result")
		frappe.db.rollback()
		self.assertEqual(frappe.db.count("BTU Run Request", {"schedule": self.schedule, "origin": "Backfill"}), 3)
		forms.close_dialog(browser, f"Backfill of {self.schedule}")

	def test_run_now_queues_the_task(self):
		browser = self.as_person(Person.BTU_MANAGER)
		steps.open_saved(browser, self.schedule)
		browser.click_button("Run Now", group="Actions")
		alert = forms.alert_matching(browser, r"Queued on default as job (\S+)")
		self.addCleanup(withdraw_job, alert.group(1))
		job = Job.fetch(alert.group(1), connection=get_redis_conn())
		arguments = job.kwargs["kwargs"]  # Frappe wraps the call: site, user, method, then its own kwargs
		self.assertEqual((arguments["task"], arguments["schedule"]), (self.task, self.schedule))

	def test_next_fires_dialog(self):
		browser = self.as_person(Person.SYSTEM_MANAGER)
		steps.open_saved(browser, self.schedule)
		browser.click_button("Next Fires", group="Actions")
		text = forms.dialog_titled(browser, f"Next fires of {self.schedule}")
		self.assertIn("At 02:30 AM (UTC)", text)
		head = forms.table_rows(browser, ".modal.show thead tr")[0]
		# Named as in the form's preview: which zone is the schedule's, which the person's.
		self.assertEqual(head, ["#", "UTC (schedule)", f"{SYSTEM_ZONE} (you)", "UTC", ""])
		rows = forms.table_rows(browser, ".modal.show tbody tr")
		self.assertEqual(len(rows), 25)
		self.assertEqual([row[0] for row in rows], [str(n) for n in range(1, 26)])
		for row in rows:
			self.assertRegex(row[1], r"^\w{3} \d{4}-\d\d-\d\d 02:30:00 UTC$")
			self.assertRegex(row[2], r"^\w{3} \d{4}-\d\d-\d\d 2[12]:30:00 E[SD]T$")
			self.assertRegex(row[3], r"T02:30:00Z$")
		browser.screenshot("schedule-next-fires-dialog")
		forms.close_dialog(browser, f"Next fires of {self.schedule}")

	def test_recent_runs(self):
		browser = self.as_person(Person.BTU_MANAGER)
		steps.open_saved(browser, self.schedule)
		browser.click_button("Recent Runs", group="Actions")
		self.assertIn("No runs yet.", forms.dialog_titled(browser, f"Recent runs of {self.schedule}"))
		forms.close_dialog(browser, f"Recent runs of {self.schedule}")

		log = frappe.get_doc(
			{
				"doctype": "BTU Task Log",
				"task": self.task,
				"schedule": self.schedule,
				"status": "Succeeded",
				"slot_utc": "2026-01-02T02:30:00Z",
				"date_time_started": "2026-01-01 21:30:02",
				"execution_time": 1.5,
				"fire_lag_ms": 12.34,
			}
		).insert(ignore_permissions=True)
		frappe.db.commit()
		browser.click_button("Recent Runs", group="Actions")
		forms.dialog_titled(browser, f"Recent runs of {self.schedule}")
		self.assertEqual(forms.table_rows(browser, ".modal.show thead tr")[0],
			["Log", "Status", "Slot (UTC)", "Started", "Duration (s)", "Fire lag (ms)"])  # fmt: skip
		self.assertEqual(forms.table_rows(browser, ".modal.show tbody tr"),
			[[log.name, "Succeeded", "2026-01-02T02:30:00Z", "2026-01-01 21:30:02", "1.500", "12.3"]])  # fmt: skip
		forms.close_dialog(browser, f"Recent runs of {self.schedule}")

	def test_pending_runs(self):
		request = frappe.get_doc(
			{
				"doctype": "BTU Run Request",
				"status": "Pending",
				"origin": "Retry",
				"task": self.task,
				"schedule": self.schedule,
				"slot_utc": "2030-01-02T02:30:00Z",
				"attempt": 2,
				"run_at": "2030-01-01 21:35:00",
				"run_at_utc": "2030-01-02T02:35:00Z",
			}
		).insert(ignore_permissions=True)
		frappe.db.commit()
		browser = self.as_person(Person.BTU_MANAGER)
		steps.open_saved(browser, self.schedule)
		shown = steps.preview_text(browser)
		self.assertIn("Retries and backfills to run", shown)
		self.assertIn("Retry of slot 2030-01-02T02:30:00Z, attempt 2: pending at 2030-01-02T02:35:00Z UTC", shown)
		browser.click_button("Pending Runs", group="Actions")
		browser.wait(lambda: browser.route().startswith("List/BTU Run Request"), "the Run Request list")
		browser.wait_for_idle()
		browser.wait(lambda: browser.shows(request.name), "the pending request listed")
		rows = browser.driver.execute_script(
			"return Array.from(document.querySelectorAll('.list-row-container .list-row'))"
			".filter((row) => row.offsetParent !== null).map((row) => row.innerText)"
		)
		self.assertEqual(len(rows), 1, rows)
		self.assertIn("Pending", rows[0])
