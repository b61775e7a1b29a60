"""What a person does with Frappe's own Desk widgets on any BTU page, and reads back from them: forms and their
fields, dialogs, child tables, lists, alerts and refusals."""

from __future__ import annotations

import re
from datetime import datetime

import frappe
from selenium.common.exceptions import (
	ElementClickInterceptedException,
	ElementNotInteractableException,
	StaleElementReferenceException,
)
from selenium.webdriver.common.action_chains import ActionChains
from selenium.webdriver.common.by import By
from selenium.webdriver.common.keys import Keys
from selenium.webdriver.remote.webelement import WebElement

from btu.btu_core.tests.desk.browser import DeskBrowser, xpath_text

# Frappe answers a Desk page (a workspace, a DocType's list or form) a person may not open with a 404 (v15) or a 403
# (v16) to getpage; the page then says so.
REFUSED_PAGE = r"desk_page\.getpage - Failed to load resource: the server responded with a status of 40[34]"
# A refused or invalid request gets an HTTP error, and Frappe's request.js prints the server's traceback.
REFUSED_REQUEST = r"status of (403|404|417)|Traceback \(most recent call last\)"
# A report a person may not open: get_script's 403, request.js printing the server's traceback, and query_report.js
# leaving the refused promise uncaught (Frappe's own, after it showed the refusal).
REFUSED_REPORT = (
	r"query_report\.get_script - Failed to load resource: the server responded with a status of 403"
	r"|Traceback \(most recent call last\)|Uncaught \(in promise\)"
)
SHOWN_DIALOG = ".modal.show "
ALERTS = "#alert-container .desk-alert, .alert-container .alert"
ROWS_JS = """
return Array.from(document.querySelectorAll(arguments[0])).filter((row) => row.offsetParent !== null)
	.map((row) => Array.from(row.cells).map((cell) => cell.innerText.trim()));
"""
MODAL_OF = "./ancestor::div[contains(concat(' ', normalize-space(@class), ' '), ' modal ')][1]"
SHOWN_MODAL = "//div[contains(@class, 'modal') and contains(@class, 'show')]"
# Whether Bootstrap finished showing a dialog (its modal, arguments[0]).
SHOWN_JS = """
const modal = window.jQuery && jQuery(arguments[0]).data('bs.modal');
const dialog = arguments[0].querySelector('.modal-dialog');
return !!modal && !modal._isTransitioning && getComputedStyle(dialog).transform === 'none';
"""
# Whether the calendar of a Date or Datetime input (arguments[0]) has finished opening.
CALENDAR_OPEN_JS = """
const picker = $(arguments[0]).data('datepicker');
return !!(picker && picker.visible && !picker.$datepicker[0].getAnimations().length);
"""

# -- forms ---------------------------------------------------------------------------------------------------------


def open_form(browser: DeskBrowser, path: str, doctype: str) -> None:
	"""Open a form by its route and wait until it is drawn (cur_frm is that DocType's, with its fields)."""
	browser.open(path)
	browser.wait(
		lambda: browser.driver.execute_script(
			"return window.cur_frm && cur_frm.doctype === arguments[0] && !!cur_frm.fields_dict", doctype
		),
		f"the {doctype} form",
	)
	browser.wait_for_idle()


def save_form(browser: DeskBrowser) -> None:
	"""Ctrl+S, then wait for what the person waits for: the form saved (no longer new or dirty), or a message.
	Frappe's save starts its request a few promises after the key, so waiting for no request in flight is not enough.
	"""
	browser.save()
	browser.wait(
		lambda: (
			browser.dialog_open()
			or browser.driver.execute_script("return !!cur_frm && !cur_frm.is_new() && !cur_frm.is_dirty()")
		),
		"the form saved, or a message",
	)
	browser.wait_for_idle()


def ctrl_s_here(browser: DeskBrowser) -> None:
	"""Ctrl+S to whatever has the focus (the input still being typed in), as a person presses it; the form's save
	then runs as Frappe runs it from there."""
	ActionChains(browser.driver).key_down(Keys.CONTROL).send_keys("s").key_up(Keys.CONTROL).perform()


def shown(browser: DeskBrowser, fieldname: str) -> str:
	"""What the open form or dialog shows for `fieldname`: the text in its input, or its read-only value."""
	scope = SHOWN_DIALOG if browser.dialog_open() else ""
	control = browser.displayed(By.CSS_SELECTOR, f"{scope}.frappe-control[data-fieldname='{fieldname}']")
	for selector in (
		"input, select, textarea:not(.ace_text-input)", ".ace_content", ".control-value, .like-disabled-input"
	):  # fmt: skip
		for element in control.find_elements(By.CSS_SELECTOR, selector):
			if element.is_displayed():
				if element.tag_name in ("input", "select", "textarea"):
					return element.get_attribute("value")
				return element.text.strip()
	return control.text


def read_only(browser: DeskBrowser, fieldname: str) -> bool:
	"""Whether the form shows `fieldname` as a value the person cannot type into (Frappe's "Read" status)."""
	return browser.driver.execute_script(
		"const field = cur_frm && cur_frm.fields_dict[arguments[0]]; return !!field && field.get_status() === 'Read';",
		fieldname,
	)


def field_description(browser: DeskBrowser, fieldname: str) -> str:
	"""The help text Frappe shows under a field of the form or the shown dialog: for a Datetime, the person's zone."""
	return browser.driver.execute_script(
		"const el = document.querySelector("
		"arguments[1] + `.frappe-control[data-fieldname='${arguments[0]}'] .help-box`);"
		" return el ? el.innerText.trim() : ''",
		fieldname,
		SHOWN_DIALOG if browser.dialog_open() else "",
	)


def headline(browser: DeskBrowser) -> str:
	"""The alert the form shows above its fields (e.g. why it is paused), "" when none is shown."""
	return browser.driver.execute_script(
		"const el = Array.from(document.querySelectorAll('.form-message')).find((m) => m.offsetParent !== null);"
		" return el ? el.innerText.trim() : ''"
	)


def fill_code(browser: DeskBrowser, fieldname: str, text: str) -> None:
	"""Type `text` into a Code field (an Ace editor) as a person does: click into it, select all, type over it.
	The form takes the text after Ace's debounce; a person's Ctrl+S comes later, so wait until the form holds it."""
	browser.click_shown(By.CSS_SELECTOR, f"[data-fieldname='{fieldname}'] .ace_content")
	typing = browser.driver.switch_to.active_element
	typing.send_keys(Keys.CONTROL, "a")
	typing.send_keys(Keys.DELETE)
	typing.send_keys(text)
	browser.wait(lambda: (browser.value(fieldname) or "") == text, f"{fieldname} to hold {text!r}")


# -- dates and times -----------------------------------------------------------------------------------------------


def datetime_pattern() -> str:
	"""The strftime pattern of a Datetime as the Desk shows it and a person types it: the site's date and time
	formats."""
	date_format = frappe.db.get_single_value("System Settings", "date_format") or "dd-mm-yyyy"
	time_format = frappe.db.get_single_value("System Settings", "time_format") or "HH:mm:ss"
	date_format = date_format.replace("yyyy", "%Y").replace("mm", "%m").replace("dd", "%d")
	return f"{date_format} {time_format.replace('HH', '%H').replace('mm', '%M').replace('ss', '%S')}"


def typed_datetime(moment: datetime) -> str:
	"""A naive datetime as a person types it into a Datetime field."""
	return moment.strftime(datetime_pattern())


def user_date(browser: DeskBrowser, iso: str) -> str:
	"""A date as the person types it (their date format)."""
	return browser.driver.execute_script("return frappe.datetime.str_to_user(arguments[0])", iso)


def open_calendar(browser: DeskBrowser, element: WebElement) -> None:
	"""Click a Date or Datetime input, as a person does before typing, and wait for its calendar to finish opening.
	Frappe's calendar rewrites the input from its own (empty) selection when its opening animation ends
	(air-datepicker's onShow(true) -> update_datepicker_position -> update): what is typed before, as when tabbing
	in and typing at once, is wiped."""
	browser.click(element)
	browser.wait(lambda: browser.driver.execute_script(CALENDAR_OPEN_JS, element), "the date field's calendar open")


def fill_datetime(browser: DeskBrowser, fieldname: str, moment: datetime) -> None:
	"""Type a naive datetime into a Datetime field of the form or the shown dialog, and leave the field."""
	open_calendar(browser, browser.field(fieldname))
	browser.fill(fieldname, typed_datetime(moment))


# -- dialogs -------------------------------------------------------------------------------------------------------


def dialog_titled(browser: DeskBrowser, title: str, seconds: float = 20) -> str:
	"""The text of the shown dialog titled `title` (its title, then its message), not of one still fading out."""
	heading = browser.displayed(
		By.XPATH, f"{SHOWN_MODAL}//*[contains(@class, 'modal-title')][normalize-space()={xpath_text(title)}]", seconds
	)
	# Until Bootstrap has shown it: a click while it still fades in is lost (hide() does nothing mid-transition).
	browser.wait(
		lambda: browser.driver.execute_script(SHOWN_JS, heading.find_element(By.XPATH, MODAL_OF)),
		f"the dialog {title!r} shown",
	)
	return heading.find_element(By.XPATH, "./ancestor::div[contains(@class, 'modal-content')]").text


def close_dialog(browser: DeskBrowser, title: str | None = None) -> None:
	"""Close the shown dialog (the one titled `title`, not a prompt still fading out) with its X. A click while
	Bootstrap still fades the dialog in is ignored, so the person clicks again until it closes."""
	modal = SHOWN_MODAL
	if title is not None:
		modal += f"[.//*[contains(@class, 'modal-title')][normalize-space()={xpath_text(title)}]]"

	def closed():
		for button in browser.all_displayed(By.XPATH, f"{modal}//*[contains(@class, 'btn-modal-close')"
			" or contains(concat(' ', normalize-space(@class), ' '), ' close ')]"):  # fmt: skip
			try:
				button.click()
			except (ElementClickInterceptedException, StaleElementReferenceException):
				pass
			break
		return not browser.all_displayed(By.XPATH, modal)

	browser.wait(closed, f"the dialog {title or ''} to close")


def dialog_primary(browser: DeskBrowser) -> None:
	"""Click the shown dialog's primary button (its label may also be a button's on the form behind it)."""
	browser.click_shown(By.CSS_SELECTOR, ".modal.show .modal-footer .btn-primary")
	browser.wait_for_idle()


# -- child tables --------------------------------------------------------------------------------------------------


def open_section(browser: DeskBrowser, label: str) -> None:
	"""Click a collapsed form section's head to show its fields, as a person does."""
	head = browser.displayed(By.XPATH, f"//*[contains(@class, 'section-head')][normalize-space()={xpath_text(label)}]")
	if "collapsed" in (head.get_attribute("class") or ""):
		browser.click(head)
	browser.wait(lambda: "collapsed" not in (head.get_attribute("class") or ""), f"the section {label} open")


def add_row(browser: DeskBrowser, table: str) -> WebElement:
	"""Click the table's Add Row; the new row's form, which Frappe opens (else its edit button does, as a person opens
	it to fill the row in full)."""
	grid = browser.displayed(By.CSS_SELECTOR, f".frappe-control[data-fieldname='{table}']")
	rows = len(grid.find_elements(By.CSS_SELECTOR, ".grid-body .grid-row"))
	browser.click(grid.find_element(By.CSS_SELECTOR, ".grid-add-row"))

	def added():
		found = grid.find_elements(By.CSS_SELECTOR, ".grid-body .grid-row")
		return found[-1] if len(found) > rows else None

	row = browser.wait(added, f"a new row in {table}")

	def opened() -> bool:
		"""The row's form shown; else its edit button clicked, unless Frappe is opening the form itself meanwhile
		(v16 does, and hides the button as it does)."""
		if browser.all_displayed(By.CSS_SELECTOR, ".grid-row-open .form-in-grid"):
			return True
		try:
			row.find_element(By.CSS_SELECTOR, ".btn-open-row").click()
		except (ElementNotInteractableException, ElementClickInterceptedException, StaleElementReferenceException):
			pass
		return False

	browser.wait(opened, f"the new row of {table} opened")
	return browser.displayed(By.CSS_SELECTOR, ".grid-row-open .form-in-grid")


def row_input(browser: DeskBrowser, row: WebElement, fieldname: str) -> WebElement:
	def found():
		for element in row.find_elements(
			By.CSS_SELECTOR, f"[data-fieldname='{fieldname}'] input, [data-fieldname='{fieldname}'] textarea"
		):
			if element.is_displayed():
				return element
		return None

	return browser.wait(found, f"the row's {fieldname}")


def check_in_row(browser: DeskBrowser, row: WebElement, fieldname: str, ticked: bool) -> None:
	"""Tick or untick a box of the open row, clicking again while a click is lost to the row form's opening."""

	def settled() -> bool:
		box = row_input(browser, row, fieldname)
		if box.is_selected() == ticked:
			return True
		try:
			box.click()
		except (ElementClickInterceptedException, ElementNotInteractableException, StaleElementReferenceException):
			pass
		return False

	browser.wait(settled, f"{fieldname} set")


def row_values(browser: DeskBrowser, table: str, fieldname: str) -> list:
	"""The form's rows' values of `fieldname` (what the form will save)."""
	return browser.driver.execute_script(
		"return (cur_frm.doc[arguments[0]] || []).map((row) => row[arguments[1]])", table, fieldname
	)


def close_row(browser: DeskBrowser) -> None:
	browser.click_shown(By.CSS_SELECTOR, ".grid-row-open .grid-collapse-row")
	browser.wait(lambda: not browser.all_displayed(By.CSS_SELECTOR, ".grid-row-open"), "the row's form to close")


def table_rows(browser: DeskBrowser, selector: str) -> list[list[str]]:
	"""The shown rows of an HTML table, each a list of its cells' texts."""
	return browser.driver.execute_script(ROWS_JS, selector)


# -- lists, alerts and refusals ------------------------------------------------------------------------------------


def list_row_links(name: str) -> str:
	"""The links a list row of document `name` shows (its title, its ID), not the row's tick box."""
	return f".list-row a[href$='/{name}'], .list-row a[data-name='{name}']"


def open_list_row(browser: DeskBrowser, name: str) -> None:
	"""Click the list's row of document `name`, as a person opens it."""
	browser.click_shown(By.CSS_SELECTOR, list_row_links(name))
	browser.wait(lambda: browser.route().endswith(f"/{name}"), f"the form of {name}")
	browser.wait_for_idle()


def list_shows(browser: DeskBrowser, name: str) -> bool:
	return bool(browser.all_displayed(By.CSS_SELECTOR, list_row_links(name)))


def buttons_shown(browser: DeskBrowser, label: str) -> list:
	return browser.all_displayed(By.XPATH, f"//button[normalize-space()={xpath_text(label)}]")


def alert_matching(browser: DeskBrowser, pattern: str) -> re.Match:
	"""The match of `pattern` in a shown alert (toast), waited for whole: an alert sliding in shows its text in parts.
	Others (an earlier run's) may be shown too."""

	def found():
		for alert in browser.all_displayed(By.CSS_SELECTOR, ALERTS):
			if match := re.search(pattern, alert.text):
				return match
		return None

	return browser.wait(found, f"an alert matching {pattern!r}")


def refused(browser: DeskBrowser, path: str | None = None) -> str:
	"""The refusal the page shows a person who may not see a DocType, a document or a page (v15 says "Not found",
	v16 "Not permitted"), after opening `path` if given."""
	if path is not None:
		browser.expect_console(REFUSED_PAGE)
		browser.open(path)
	browser.wait(lambda: browser.shows("Not permitted") or browser.shows("Not found"), f"a refusal of {path or 'it'}")
	return browser.visible_text()
