"""The BTU Task Schedule form in a real browser: its Next Fires preview and Cron String following the fields before
any save, values typed last (or while the preview is on its way) kept by Ctrl+S, and the refusal a user without a BTU
role meets."""

from __future__ import annotations

import frappe

from btu.btu_core.tests.desk import forms, records
from btu.btu_core.tests.desk import schedule_steps as steps
from btu.btu_core.tests.desk.case import DeskTestCase
from btu.btu_core.tests.desk.people import Person

# The preview waits 400 ms after a change and the request has its own delay: long enough to type a field meanwhile.
SLOW_MS = 1500


class TestScheduleForm(DeskTestCase):
	def setUp(self):
		super().setUp()
		self.label = records.unique("Desk schedule")
		self.task = records.committed_task(self, desc_short=self.label)

	def stored(self, name: str, *fields: str) -> tuple:
		frappe.db.rollback()
		values = frappe.db.get_value("BTU Task Schedule", name, list(fields), as_dict=True)
		return tuple(values[field] for field in fields)

	def first_fire(self, browser) -> str:
		rows = steps.preview_rows(browser)
		return rows[0][1] if rows else ""

	def test_the_preview_and_the_cron_follow_the_fields_before_saving(self):
		browser = self.as_person(Person.BTU_MANAGER)
		steps.open_new(browser)
		browser.link("task", self.label)
		browser.fill("time_zone", "Europe/London")
		browser.choose("run_frequency", "Hourly")
		browser.wait(lambda: forms.shown(browser, "cron_string") == "0 * * * *", "the hourly cron")
		browser.fill("minute", "10")
		browser.wait(lambda: forms.shown(browser, "cron_string") == "10 * * * *", "the cron at minute 10")
		browser.wait(lambda: ":10:00 " in self.first_fire(browser), "the first fire at minute 10")
		self.assertIn("At 10 minutes past the hour (Europe/London)", steps.preview_text(browser))

		browser.choose("run_frequency", "Daily")
		# The helper's cron at once, not only after a save writes it.
		browser.wait(lambda: forms.shown(browser, "cron_string") == "10 0 * * *", "the daily cron")
		browser.wait(lambda: self.first_fire(browser).endswith(" 00:10:00 GMT"), "the first fire at 00:10")
		before = self.first_fire(browser)
		browser.fill("hour", "6")
		browser.wait(lambda: self.first_fire(browser).endswith(" 06:10:00 GMT"), "the first fire at 06:10")
		self.assertNotEqual(self.first_fire(browser), before)
		self.assertEqual(forms.shown(browser, "cron_string"), "10 6 * * *")
		self.assertIn("At 06:10 AM (Europe/London)", steps.preview_text(browser))
		# None of it saved: still the new form, and no schedule of the Task in the database.
		self.assertTrue(browser.driver.execute_script("return cur_frm.is_new()"))
		self.assertTrue(browser.shows("Not Saved"))
		self.assertFalse(frappe.db.exists("BTU Task Schedule", {"task": self.task}))

		browser.save()
		name = steps.saved_name(browser)
		self.assertEqual(
			self.stored(name, "run_frequency", "hour", "minute", "cron_string"), ("Daily", 6, 10, "10 6 * * *")
		)

	def test_a_change_to_a_saved_schedule_is_previewed_unsaved(self):
		name = steps.make_schedule(self.task, time_zone="Asia/Kolkata", hour=2, minute=30)
		browser = self.as_person(Person.SYSTEM_MANAGER)
		steps.open_saved(browser, name)
		self.assertTrue(self.first_fire(browser).endswith(" 02:30:00 IST"))
		browser.fill("hour", "14")
		browser.wait(lambda: self.first_fire(browser).endswith(" 14:30:00 IST"), "the first fire at 14:30")
		self.assertEqual(forms.shown(browser, "cron_string"), "30 14 * * *")
		self.assertTrue(browser.shows("Not Saved"))
		self.assertEqual(self.stored(name, "hour", "cron_string"), (2, "30 2 * * *"))
		browser.save()
		steps.saved_name(browser)
		self.assertEqual(self.stored(name, "hour", "cron_string"), (14, "30 14 * * *"))

	def test_a_minute_typed_last_is_saved_by_ctrl_s(self):
		browser = self.as_person(Person.BTU_MANAGER)
		steps.open_new(browser)
		browser.link("task", self.label)
		browser.choose("run_frequency", "Daily")
		browser.fill("hour", "7")
		browser.fill("minute", "25", blur=False)
		forms.ctrl_s_here(browser)
		name = steps.saved_name(browser)
		self.assertEqual((forms.shown(browser, "hour"), forms.shown(browser, "minute")), ("7", "25"))
		self.assertEqual(self.stored(name, "hour", "minute", "cron_string"), (7, 25, "25 7 * * *"))

	def test_an_hour_typed_last_on_a_saved_schedule_is_saved_by_ctrl_s(self):
		name = steps.make_schedule(self.task)
		browser = self.as_person(Person.SYSTEM_MANAGER)
		steps.open_saved(browser, name)
		browser.fill("minute", "5")
		browser.fill("hour", "23", blur=False)
		forms.ctrl_s_here(browser)
		steps.saved_name(browser)
		self.assertEqual((forms.shown(browser, "hour"), forms.shown(browser, "minute")), ("23", "5"))
		self.assertEqual(self.stored(name, "hour", "minute", "cron_string"), (23, 5, "5 23 * * *"))

	def test_an_hour_typed_while_the_preview_is_on_its_way_is_saved(self):
		"""The preview answers each change; what the person types before that answer arrives stays typed and is
		saved (the answer used to write the form's values as they were when it was asked, over what was typed)."""
		browser = self.as_person(Person.BTU_MANAGER)
		steps.open_new(browser)
		browser.link("task", self.label)
		browser.choose("run_frequency", "Daily")
		browser.fill("minute", "40")
		browser.slow_network(SLOW_MS)
		self.addCleanup(browser.slow_network, 0)
		browser.request_in_flight()
		browser.fill("hour", "9", blur=False)
		browser.wait_for_idle()
		self.assertEqual(forms.shown(browser, "hour"), "9")
		forms.ctrl_s_here(browser)
		name = steps.saved_name(browser)
		browser.slow_network(0)
		self.assertEqual((forms.shown(browser, "hour"), forms.shown(browser, "minute")), ("9", "40"))
		self.assertEqual(self.stored(name, "hour", "minute", "cron_string"), (9, 40, "40 9 * * *"))

	def test_a_user_without_a_btu_role_is_refused_the_list_and_the_form(self):
		name = steps.make_schedule(self.task)
		browser = self.as_person(Person.PLAIN_USER)
		for path in ("/app/btu-task-schedule", "/app/btu-task-schedule/new", f"/app/btu-task-schedule/{name}"):
			with self.subTest(path=path):
				# Frappe takes a DocType the user may not read for a Page: v15 says it is not found (a 404), v16 that
				# the user may not open Pages (a 403); the console logs either.
				browser.expect_console(r"frappe\.desk\.desk_page\.getpage .* (404|403)")
				browser.open(path)
				browser.wait(
					lambda: (
						browser.shows("Page btu-task-schedule not found") or browser.shows("No permission for Page")
					),
					"Frappe's refusal",
				)
				self.assertTrue(browser.shows("Not found") or browser.shows("Not permitted"))
				self.assertFalse(browser.shows(self.label))
				self.assertFalse(browser.shows("Next Fires"))
