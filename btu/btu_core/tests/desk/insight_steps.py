"""Steps and committed records of the browser tests of the workspace, the Dashboard, BTU Configuration, calendars,
alerts and reports (test_desk_workspace.py, test_desk_config.py, test_desk_reports.py)."""

from __future__ import annotations

import time
from datetime import datetime, timedelta

import frappe
from selenium.common.exceptions import (
	ElementClickInterceptedException,
	ElementNotInteractableException,
	StaleElementReferenceException,
)
from selenium.webdriver.common.by import By
from selenium.webdriver.remote.webelement import WebElement

from btu.btu_core.tests.desk.browser import DeskBrowser, xpath_text
from btu.btu_core.tests.utils import make_task, patient

# Frappe answers a Desk page (a workspace, a DocType's list or form) a person may not open with a 404 (v15) or a 403
# (v16) to getpage; the page then says so.
REFUSED_PAGE = r"desk_page\.getpage - Failed to load resource: the server responded with a status of 40[34]"
# A report a person may not open: get_script's 403, request.js printing the server's traceback, and query_report.js
# leaving the refused promise uncaught (Frappe's own, after it showed the refusal).
REFUSED_REPORT = (
	r"query_report\.get_script - Failed to load resource: the server responded with a status of 403"
	r"|Traceback \(most recent call last\)|Uncaught \(in promise\)"
)

# -- records -------------------------------------------------------------------------------------------------------


def unique(prefix: str) -> str:
	return f"{prefix} {frappe.generate_hash(length=8)}"


def committed_task(case, **values) -> str:
	"""A Task the web server sees, removed after the test class (or test) with its logs, schedules and incidents."""
	frappe.set_user("Administrator")
	values.setdefault("desc_short", unique("desk insights"))
	task = make_task("say_hello", **values).name
	frappe.db.commit()
	cleanup = case.addClassCleanup if isinstance(case, type) else case.addCleanup
	cleanup(remove_task, task)
	return task


def remove_task(task: str) -> None:
	frappe.db.rollback()
	frappe.set_user("Administrator")
	for doctype in ("BTU Alert Incident", "BTU Run Request", "BTU Task Log"):
		frappe.db.delete(doctype, {"task": task})
	for name in frappe.get_all("BTU Task Schedule", filters={"task": task}, pluck="name"):
		frappe.delete_doc("BTU Task Schedule", name, force=True, ignore_permissions=True)
	frappe.delete_doc("BTU Task", task, force=True, ignore_permissions=True)
	frappe.db.commit()


def committed_logs(task: str, rows: list[dict], schedule: str | None = None) -> list[str]:
	"""Task Logs of `task` (and `schedule`), committed: each row's started (a datetime), status, fire_lag_ms and
	seconds."""
	names = []
	for row in rows:
		started: datetime = row["started"]
		log = frappe.get_doc(
			{
				"doctype": "BTU Task Log",
				"task": task,
				"schedule": schedule,
				"status": row.get("status", "Succeeded"),
				"date_time_started": started,
				"execution_time": row.get("seconds"),
				"fire_lag_ms": row.get("fire_lag_ms"),
				# A scheduled run: its slot as long before its start as its fire lag (a run started by hand has none).
				"slot": started - timedelta(milliseconds=row["fire_lag_ms"]) if "fire_lag_ms" in row else None,
			}
		).insert(ignore_permissions=True)
		names.append(log.name)
	frappe.db.commit()
	return names


def restore_single(case, doctype: str, *fieldnames: str) -> None:
	"""Put the Single's fields back as they are now after the test (a person's save changes them)."""
	kept = {fieldname: frappe.db.get_single_value(doctype, fieldname) for fieldname in fieldnames}

	def restore():
		frappe.db.rollback()
		for fieldname, value in kept.items():
			frappe.db.set_single_value(doctype, fieldname, value)
		frappe.db.commit()

	case.addCleanup(restore)


# -- forms and dialogs ---------------------------------------------------------------------------------------------


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
	"""Ctrl+S, then until the form is saved (not new, nothing unsaved) or a message is shown."""
	browser.save()
	browser.wait(
		lambda: (
			browser.dialog_open()
			or browser.driver.execute_script("return !!cur_frm && !cur_frm.is_new() && !cur_frm.is_dirty()")
		),
		"the form saved, or a message",
	)
	browser.wait_for_idle()


def read_only(browser: DeskBrowser, fieldname: str) -> bool:
	"""Whether the form shows `fieldname` as a value the person cannot type into (Frappe's "Read" status)."""
	return browser.driver.execute_script(
		"const field = cur_frm && cur_frm.fields_dict[arguments[0]]; return !!field && field.get_status() === 'Read';",
		fieldname,
	)


MODAL_OF = "./ancestor::div[contains(concat(' ', normalize-space(@class), ' '), ' modal ')][1]"
# Whether Bootstrap finished showing a dialog (its modal, arguments[0]).
SHOWN_JS = """
const modal = window.jQuery && jQuery(arguments[0]).data('bs.modal');
const dialog = arguments[0].querySelector('.modal-dialog');
return !!modal && !modal._isTransitioning && getComputedStyle(dialog).transform === 'none';
"""


def dialog_titled(browser: DeskBrowser, title: str, seconds: float = 20) -> str:
	"""The text of the shown dialog titled `title` (its title, then its message), not of one still fading out."""
	shown = "//div[contains(@class, 'modal') and contains(@class, 'show')]"
	heading = browser.displayed(
		By.XPATH, f"{shown}//*[contains(@class, 'modal-title')][normalize-space()={xpath_text(title)}]", seconds
	)
	# Until Bootstrap has shown it: a click while it still fades in is lost (hide() does nothing mid-transition).
	browser.wait(
		lambda: browser.driver.execute_script(SHOWN_JS, heading.find_element(By.XPATH, MODAL_OF)),
		f"the dialog {title!r} shown",
	)
	return heading.find_element(By.XPATH, "./ancestor::div[contains(@class, 'modal-content')]").text


def dismiss_dialog(browser: DeskBrowser) -> None:
	"""Close the shown dialog with its X; a click while Bootstrap still fades it in is ignored, so click again."""

	def closed():
		for button in browser.all_displayed(By.CSS_SELECTOR, ".modal.show .btn-modal-close, .modal.show .close"):
			try:
				button.click()
			except ElementClickInterceptedException:
				pass
			break
		return not browser.dialog_open()

	browser.wait(closed, "the dialog to close")


def refused(browser: DeskBrowser, path: str) -> str:
	"""Open `path` as a person who may not, and the refusal the page shows (v15: "Not found", v16: "Not permitted")."""
	browser.expect_console(REFUSED_PAGE)
	browser.open(path)
	browser.wait(lambda: browser.shows("Not permitted") or browser.shows("Not found"), f"a refusal of {path}")
	return browser.visible_text()


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


def row_values(browser: DeskBrowser, table: str, fieldname: str) -> list:
	"""The form's rows' values of `fieldname` (what the form will save)."""
	return browser.driver.execute_script(
		"return (cur_frm.doc[arguments[0]] || []).map((row) => row[arguments[1]])", table, fieldname
	)


def close_row(browser: DeskBrowser) -> None:
	browser.click_shown(By.CSS_SELECTOR, ".grid-row-open .grid-collapse-row")
	browser.wait(lambda: not browser.all_displayed(By.CSS_SELECTOR, ".grid-row-open"), "the row's form to close")


def user_date(browser: DeskBrowser, iso: str) -> str:
	"""A date as the person types it (their date format)."""
	return browser.driver.execute_script("return frappe.datetime.str_to_user(arguments[0])", iso)


# -- the workspace, the Dashboard and reports ----------------------------------------------------------------------

# frappe-charts' entry: 0.7 s on a figure of zeros, then 0.35 s of animation and 0.4 s until it redraws the figure.
SETTLE_SECONDS = 1.5

# Each number card: its title and the number it shows (or "" while loading).
CARDS_JS = """
return Array.from(document.querySelectorAll('.widget.number-widget-box')).filter((w) => w.offsetParent).map((w) => [
	(w.querySelector('.widget-title') || {}).textContent.trim(),
	((w.querySelector('.number') || {}).textContent || '').trim(),
]);
"""

# Each chart: its title, and what it shows: still loading, "No Data", or its figure (axes' labels, legends and whether
# each fits inside the figure, the bars and lines drawn).
CHARTS_JS = """
const shown = (e) => !!e && e.getClientRects().length > 0;
return Array.from(document.querySelectorAll('.widget.dashboard-widget-box')).filter(shown).map((w) => {
	const svg = w.querySelector('svg.frappe-chart');
	const states = Array.from(w.querySelectorAll('.chart-loading-state')).filter(shown)
		.map((e) => e.textContent.trim());
	const chart = { title: w.querySelector('.widget-title').textContent.trim(), states, drawn: shown(svg) };
	if (!chart.drawn) return chart;
	const box = svg.getBoundingClientRect();
	const texts = (selector) => Array.from(svg.querySelectorAll(selector)).map((t) => t.textContent.trim());
	chart.y = texts('.y.axis text');
	chart.x = texts('.x.axis text');
	chart.legends = Array.from(svg.querySelectorAll('.legend-dataset-label')).map((t) => {
		const r = t.getBoundingClientRect();
		return [t.textContent.trim(), r.left >= box.left - 1 && r.right <= box.right + 1];
	});
	chart.bars = svg.querySelectorAll('.dataset-units rect').length;
	chart.lines = svg.querySelectorAll('.dataset-units path.line-graph-path').length;
	return chart;
});
"""


def wait_for_texts(browser: DeskBrowser, *texts: str) -> None:
	"""Until the page shows every one of `texts` (any letter case), read in one go from the page's rendered text."""
	wanted = [text.casefold() for text in texts]

	def missing():
		shown = browser.driver.execute_script("return document.body.innerText").casefold()
		return [text for text in wanted if text not in shown]

	browser.wait(lambda: not missing(), f"the texts {texts}")


# The report's chart as drawn (None without one): its texts and shapes.
REPORT_CHART_JS = """
const svg = Array.from(document.querySelectorAll('.chart-wrapper svg.frappe-chart'))
	.find((s) => s.getClientRects().length > 0);
if (!svg) return null;
return [svg.textContent, svg.querySelectorAll('rect, path, circle').length, svg.innerHTML.length];
"""


def cards(browser: DeskBrowser, titles: tuple[str, ...]) -> dict[str, str]:
	"""The number each card shows, once all of `titles` have loaded."""

	def loaded():
		found = {title.casefold(): number for title, number in browser.driver.execute_script(CARDS_JS)}
		numbers = {title: found.get(title.casefold()) for title in titles}
		return numbers if all(number and number != "Loading..." for number in numbers.values()) else None

	return browser.wait(loaded, f"the cards {titles}")


def settled(browser: DeskBrowser, read, what: str):
	"""read()'s answer once truthy and the same for SETTLE_SECONDS: a chart that stopped moving (frappe-charts draws
	a figure of zeros first, then animates to the data)."""
	last, since = None, 0.0

	def still():
		nonlocal last, since
		now = read()
		if now != last:
			last, since = now, time.monotonic()
			return None
		return now if now and time.monotonic() - since >= patient(SETTLE_SECONDS) else None

	return browser.wait(still, what)


def charts(browser: DeskBrowser, titles: tuple[str, ...]) -> dict[str, dict]:
	"""What each chart of `titles` shows once drawn: "No Data", or its figure once it stopped moving."""

	def drawn():
		found = {chart["title"]: chart for chart in browser.driver.execute_script(CHARTS_JS)}
		if not all(title in found for title in titles):
			return None
		for title in titles:
			chart = found[title]
			if "Loading..." in chart["states"] or not (chart["drawn"] or "No Data" in chart["states"]):
				return None
		return {title: found[title] for title in titles}

	return settled(browser, drawn, f"the charts {titles} drawn")


def report_table(browser: DeskBrowser) -> tuple[list[str], list[list[str]]]:
	"""The report's table as the person sees it: its column headings and each row's cells (the row number left
	out)."""
	return browser.driver.execute_script(
		"const cells = (row) => Array.from(row.querySelectorAll('.dt-cell__content')).slice(1)"
		"  .map((c) => c.textContent.trim());"
		"const header = document.querySelector('.dt-row-header');"
		"const rows = document.querySelectorAll('.dt-scrollable .dt-row:not(.dt-row-header):not(.dt-row-filter)');"
		"return [header ? cells(header) : [], Array.from(rows).map(cells)];"
	)


def report_ready(browser: DeskBrowser, name: str) -> None:
	"""Until the report shows its table (or that it has none) and its chart, if any, stopped moving: a filter changed
	while Frappe still draws the chart makes frappe-charts fail ("removeChild ... not a child of this node")."""
	browser.wait(
		lambda: browser.driver.execute_script(
			"return window.frappe && frappe.query_report && frappe.query_report.report_name === arguments[0]"
			" && !!document.querySelector('.dt-scrollable, .no-result:not(.hidden)')",
			name,
		),
		f"the report {name}",
	)
	browser.wait_for_idle()
	settled(browser, lambda: browser.driver.execute_script(REPORT_CHART_JS) or "none", f"the chart of {name}")
