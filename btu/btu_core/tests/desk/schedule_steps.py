"""Steps on the BTU Task Schedule form: what a person does there and reads back (the test_desk_schedules*.py)."""

from __future__ import annotations

import frappe

from btu.btu_core.tests import utils
from btu.btu_core.tests.desk import forms
from btu.btu_core.tests.desk.browser import DeskBrowser

DOCTYPE = "BTU Task Schedule"
PREVIEW = "[data-fieldname='next_fires_html']"


def make_schedule(task: str, **values) -> str:
	"""A committed, enabled schedule (Daily at 02:30 UTC unless `values` say otherwise) for the person to open. Saved
	disabled and enabled in the database: no scheduler is told (without one, telling it waits 5 s), so none fires it."""
	doc = utils.make_schedule(task, **values)
	frappe.db.set_value(DOCTYPE, doc.name, "enabled", 1, update_modified=False)
	frappe.db.commit()
	return doc.name


def open_new(browser: DeskBrowser) -> None:
	browser.open("/app/btu-task-schedule/new")
	browser.wait(lambda: browser.driver.execute_script(
		"return window.cur_frm && cur_frm.doctype === arguments[0] && cur_frm.is_new()", DOCTYPE
	), "a new schedule form")  # fmt: skip
	browser.field("task")
	browser.wait_for_idle()


def open_saved(browser: DeskBrowser, name: str) -> None:
	browser.open(f"/app/btu-task-schedule/{name}")
	form_ready(browser, new=False)


def form_ready(browser: DeskBrowser, new: bool) -> None:
	"""Until the schedule form is drawn with its first preview (the person sees the Next Fires table or its error)."""
	browser.wait(
		lambda: browser.driver.execute_script(
			"return window.cur_frm && cur_frm.doctype === arguments[0] && !!cur_frm.is_new() === arguments[1]"
			" && !!document.querySelector(arguments[2] + ' .btu-next-fires, ' + arguments[2] + ' .text-danger')",
			DOCTYPE,
			new,
			PREVIEW,
		),
		"the schedule form and its Next Fires preview",
	)
	browser.wait_for_idle()


def saved_name(browser: DeskBrowser) -> str:
	"""The schedule's name once the form shows it saved (not new, nothing unsaved, its preview drawn again)."""
	name = browser.wait(
		lambda: browser.driver.execute_script(
			"return window.cur_frm && cur_frm.doctype === arguments[0] && !cur_frm.is_new() && !cur_frm.doc.__unsaved"
			" && cur_frm.doc.name",
			DOCTYPE,
		),
		"the schedule saved",
	)
	form_ready(browser, new=False)
	return name


def preview_rows(browser: DeskBrowser) -> list[list[str]]:
	return forms.table_rows(browser, f"{PREVIEW} .btu-next-fires tbody tr")


def preview_head(browser: DeskBrowser) -> list[str]:
	return (forms.table_rows(browser, f"{PREVIEW} .btu-next-fires thead tr") or [[]])[0]


def preview_text(browser: DeskBrowser) -> str:
	return browser.driver.execute_script(
		"const el = document.querySelector(arguments[0]); return el ? el.innerText : ''", PREVIEW
	)
