"""Steps on the BTU Task Schedule form for the Desk tests: what a person does there and reads back.

Candidates for browser.py (other forms need them too): fill_datetime (waits for the calendar to open: typing before
it wipes the text), ctrl_s_here (Ctrl+S to the focused input, as a person presses it while still typing),
wait_for_dialog and close_dialog (by title, once Bootstrap has shown it), dialog_primary, shown_text, field_description,
table_rows, slow_network and request_in_flight.
"""

from __future__ import annotations

import json

import frappe
from frappe.utils.background_jobs import get_redis_conn
from selenium.webdriver.common.action_chains import ActionChains
from selenium.webdriver.common.by import By
from selenium.webdriver.common.keys import Keys

from btu.btu_core.scheduler_link import scheduler_running
from btu.btu_core.tests.desk.browser import DeskBrowser, xpath_text
from btu.btu_core.tests.utils import SAMPLES
from btu.shared import protocol

DOCTYPE = "BTU Task Schedule"
PREVIEW = "[data-fieldname='next_fires_html']"
ROWS_JS = """
return Array.from(document.querySelectorAll(arguments[0])).filter((row) => row.offsetParent !== null)
	.map((row) => Array.from(row.cells).map((cell) => cell.innerText.trim()));
"""


def make_task(label: str) -> str:
	"""A committed Task the person picks by its description (the Link field shows it, not the name)."""
	task = frappe.get_doc(
		{
			"doctype": "BTU Task",
			"desc_short": label,
			"function_string": f"{SAMPLES}.say_hello",
			"queue_name": "default",
			"max_task_duration": 60,
		}
	).insert(ignore_permissions=True)
	frappe.db.commit()
	return task.name


def make_schedule(task: str, **values) -> str:
	"""A committed, enabled schedule (Daily at 02:30 UTC unless `values` say otherwise) for the person to open. Saved
	disabled and enabled in the database: no scheduler is told (without one, telling it waits 5 s), so none fires it."""
	doc = frappe.get_doc(
		{
			"doctype": DOCTYPE,
			"task": task,
			"enabled": 0,
			"run_frequency": "Daily",
			"hour": 2,
			"minute": 30,
			"time_zone": "UTC",
			**values,
		}
	).insert(ignore_permissions=True)
	frappe.db.set_value(DOCTYPE, doc.name, "enabled", 1, update_modified=False)
	frappe.db.commit()
	return doc.name


def remove_task(task: str) -> None:
	"""The Task with its schedules, run requests and logs, committed."""
	frappe.db.rollback()
	frappe.db.delete("BTU Run Request", {"task": task})
	frappe.db.delete("BTU Task Log", {"task": task})
	names = frappe.get_all(DOCTYPE, filters={"task": task}, pluck="name")
	if not scheduler_running():
		# Deleting an enabled schedule tells the scheduler, and waits 5 s for one that is not there.
		frappe.db.set_value(DOCTYPE, {"task": task}, "enabled", 0, update_modified=False)
		drop_commands(names)
	for name in names:
		frappe.delete_doc(DOCTYPE, name, force=True, ignore_permissions=True)
	frappe.delete_doc("BTU Task", task, force=True, ignore_permissions=True)
	frappe.db.commit()


def drop_commands(schedules: list[str]) -> None:
	"""Take off Redis the commands the person's saves left for a scheduler that is not running: Frappe reuses the
	name of the last schedule deleted, and a later test of the same name would find them."""
	connection = get_redis_conn()
	for raw in connection.lrange(protocol.COMMANDS_KEY, 0, -1):
		command = json.loads(raw)
		if command.get("site") == frappe.local.site and command.get("request_content") in schedules:
			connection.lrem(protocol.COMMANDS_KEY, 0, raw)


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


def typed_datetime(moment) -> str:
	"""A naive datetime as a person types it into a Datetime field, in the site's date and time formats."""
	settings = frappe.get_cached_doc("System Settings")
	date_format = (settings.date_format or "dd-mm-yyyy").replace("yyyy", "%Y").replace("mm", "%m").replace("dd", "%d")
	time_format = (settings.time_format or "HH:mm:ss").replace("HH", "%H").replace("mm", "%M").replace("ss", "%S")
	return moment.strftime(f"{date_format} {time_format}")


def fill_datetime(browser: DeskBrowser, fieldname: str, moment) -> None:
	"""Type a naive datetime into a Datetime field (a form's or a dialog's) as a person does: click it, wait for the
	calendar to finish opening, type, leave. Frappe's calendar rewrites the input from its own (empty) selection when
	its opening animation ends (air-datepicker's onShow(true) -> update_datepicker_position -> update): what is typed
	before that, as when tabbing in and typing at once, is wiped."""
	element = browser.field(fieldname)
	browser.driver.execute_script("arguments[0].scrollIntoView({block: 'center'})", element)
	browser.click(element)
	browser.wait(
		lambda: browser.driver.execute_script(
			"const picker = $(arguments[0]).data('datepicker');"
			" return !!(picker && picker.visible && !picker.$datepicker[0].getAnimations().length)",
			element,
		),
		f"the calendar of {fieldname} open",
	)
	browser.fill(fieldname, typed_datetime(moment))


def ctrl_s_here(browser: DeskBrowser) -> None:
	"""Ctrl+S to whatever has the focus (the input still being typed in), as a person presses it; the form's save
	then runs as Frappe runs it from there."""
	ActionChains(browser.driver).key_down(Keys.CONTROL).send_keys("s").key_up(Keys.CONTROL).perform()


def slow_network(browser: DeskBrowser, latency_ms: int) -> None:
	"""Every request takes `latency_ms` more each way (0: as fast as it is), as on a distant person's line."""
	browser.driver.execute_cdp_cmd("Network.enable", {})
	browser.driver.execute_cdp_cmd(
		"Network.emulateNetworkConditions",
		{"offline": False, "latency": latency_ms, "downloadThroughput": -1, "uploadThroughput": -1},
	)


def request_in_flight(browser: DeskBrowser) -> None:
	"""Until the page has a request on its way (polled in the page: a slow network keeps it there for a while)."""
	browser.wait(
		lambda: browser.driver.execute_script("return !!(window.frappe && frappe.request.ajax_count > 0)"),
		"a request on its way",
	)


def shown_text(browser: DeskBrowser, fieldname: str) -> str:
	"""What a field shows: its input's value, or a read-only field's text."""
	return browser.driver.execute_script(
		"const control = cur_frm.get_field(arguments[0]); const input = control.$input && control.$input[0];"
		" if (input && control.$input.is(':visible')) return input.value;"
		" return ($(control.wrapper).find('.control-value, .like-disabled-input').filter(':visible').first().text()"
		" || '').trim();",
		fieldname,
	)


def field_description(browser: DeskBrowser, fieldname: str, dialog: bool = False) -> str:
	"""The help text Frappe shows under a form's (or the shown dialog's) field: for a Datetime, the person's zone."""
	return browser.driver.execute_script(
		"const el = document.querySelector("
		"arguments[1] + `.frappe-control[data-fieldname='${arguments[0]}'] .help-box`);"
		" return el ? el.innerText.trim() : ''",
		fieldname,
		".modal.show " if dialog else "",
	)


def headline(browser: DeskBrowser) -> str:
	"""The alert the form shows above its fields (e.g. why it is paused), "" when none is shown."""
	return browser.driver.execute_script(
		"const el = Array.from(document.querySelectorAll('.form-message')).find((m) => m.offsetParent !== null);"
		" return el ? el.innerText.trim() : ''"
	)


def table_rows(browser: DeskBrowser, selector: str) -> list[list[str]]:
	"""The shown rows of a table, each a list of its cells' texts."""
	return browser.driver.execute_script(ROWS_JS, selector)


def preview_rows(browser: DeskBrowser) -> list[list[str]]:
	return table_rows(browser, f"{PREVIEW} .btu-next-fires tbody tr")


def preview_head(browser: DeskBrowser) -> list[str]:
	return (table_rows(browser, f"{PREVIEW} .btu-next-fires thead tr") or [[]])[0]


def preview_text(browser: DeskBrowser) -> str:
	return browser.driver.execute_script(
		"const el = document.querySelector(arguments[0]); return el ? el.innerText : ''", PREVIEW
	)


def dialog_title(browser: DeskBrowser) -> str:
	return browser.driver.execute_script(
		"const el = Array.from(document.querySelectorAll('.modal.show .modal-title')).pop();"
		" return el ? el.innerText : ''"
	)


def wait_for_dialog(browser: DeskBrowser, title: str) -> str:
	"""The text of the dialog titled `title` once it has come in: Bootstrap ignores a click on its X while it is still
	fading in, and a prompt closing may still be on screen before it."""
	browser.wait(
		lambda: browser.driver.execute_script(
			"return !!(window.cur_dialog && cur_dialog.display"
			" && cur_dialog.$wrapper.find('.modal-title').text().trim() === arguments[0])",
			title,
		),
		f"the dialog {title!r}",
	)
	return browser.dialog_text()


def dialog_primary(browser: DeskBrowser) -> None:
	"""Click the shown dialog's primary button (its label may also be a button's on the form behind it)."""
	browser.click_shown(By.CSS_SELECTOR, ".modal.show .modal-footer .btn-primary")
	browser.wait_for_idle()


def close_dialog(browser: DeskBrowser, title: str) -> None:
	"""Close the dialog titled `title` with its X (the base's close_dialog may pick a prompt still fading out)."""
	modal = browser.displayed(
		By.XPATH, f"//div[contains(@class, 'modal') and contains(@class, 'show')][.//*[contains(@class, 'modal-title')]"
		f"[normalize-space()={xpath_text(title)}]]"
	)  # fmt: skip
	browser.click(modal.find_element(By.CSS_SELECTOR, ".btn-modal-close, .close"))
	browser.wait(lambda: dialog_title(browser) != title or not browser.dialog_open(), f"the dialog {title!r} closed")
