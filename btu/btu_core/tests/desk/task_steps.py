"""Steps and committed records the Task, Task Log and Run Request browser tests share (test_desk_tasks.py,
test_desk_runs.py)."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import uuid
from datetime import datetime

import frappe
from selenium.common.exceptions import ElementClickInterceptedException
from selenium.webdriver.common.by import By
from selenium.webdriver.common.keys import Keys

from btu.btu_core.tests.desk.browser import DeskBrowser, xpath_text
from btu.btu_core.tests.desk.people import LOGINS, Person
from btu.btu_core.tests.utils import delete_committed, make_task, patient

# Frappe answers a refused or invalid request with an HTTP error, and its request.js prints the server's traceback:
# both are on the console whenever a step is refused on purpose.
REFUSED_REQUEST = r"status of (403|404|417)|Traceback \(most recent call last\)"

# -- steps ---------------------------------------------------------------------------------------------------------


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


def fill_code(browser: DeskBrowser, fieldname: str, text: str) -> None:
	"""Type `text` into a Code field (an Ace editor) as a person does: click into it, select all, type over it.
	The form takes the text after Ace's debounce; a person's Ctrl+S comes later, so wait until the form holds it."""
	browser.click_shown(By.CSS_SELECTOR, f"[data-fieldname='{fieldname}'] .ace_content")
	typing = browser.driver.switch_to.active_element
	typing.send_keys(Keys.CONTROL, "a")
	typing.send_keys(Keys.DELETE)
	typing.send_keys(text)
	browser.wait(lambda: (browser.value(fieldname) or "") == text, f"{fieldname} to hold {text!r}")


def shown(browser: DeskBrowser, fieldname: str) -> str:
	"""What the open form or dialog shows for `fieldname`: the text in its input, or its read-only value."""
	scope = ".modal.show " if browser.dialog_open() else ""
	control = browser.displayed(By.CSS_SELECTOR, f"{scope}.frappe-control[data-fieldname='{fieldname}']")
	for selector in ("input, select, textarea:not(.ace_text-input)", ".ace_content", ".control-value"):
		for element in control.find_elements(By.CSS_SELECTOR, selector):
			if element.is_displayed():
				return (
					element.get_attribute("value")
					if element.tag_name in ("input", "select", "textarea")
					else element.text
				)
	return control.text


def buttons_shown(browser: DeskBrowser, label: str) -> list:
	return browser.all_displayed(By.XPATH, f"//button[normalize-space()={xpath_text(label)}]")


def field_is_read_only(browser: DeskBrowser, fieldname: str) -> bool:
	"""Whether the open form shows `fieldname` as a value, not as an input the person can type into."""
	return browser.driver.execute_script(
		"const field = cur_frm && cur_frm.fields_dict[arguments[0]]; return !!field && field.get_status() === 'Read';",
		fieldname,
	)


def dismiss_dialog(browser: DeskBrowser) -> None:
	"""Close the shown dialog with its X. A click while Bootstrap still fades the dialog in is ignored, so the person
	clicks again until it closes."""

	def closed():
		for button in browser.all_displayed(By.CSS_SELECTOR, ".modal.show .btn-modal-close, .modal.show .close"):
			try:
				button.click()
			except ElementClickInterceptedException:
				pass
			break
		return not browser.dialog_open()

	browser.wait(closed, "the dialog to close")


def alert_matching(browser: DeskBrowser, pattern: str) -> re.Match:
	"""The match of `pattern` in a shown alert (toast), waited for whole: an alert sliding in shows its text in parts.
	Others (an earlier run's) may be shown too."""

	def found():
		for alert in browser.all_displayed(By.CSS_SELECTOR, "#alert-container .desk-alert, .alert-container .alert"):
			if match := re.search(pattern, alert.text):
				return match
		return None

	return browser.wait(found, f"an alert matching {pattern!r}")


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


def refused(browser: DeskBrowser) -> str:
	"""The page Frappe shows a person refused a document or a DocType: its text (v15 says a DocType the person may not
	read is "Not found", v16 "Not permitted")."""
	browser.wait(lambda: browser.shows("Not permitted") or browser.shows("Not found"), "a refusal")
	return browser.visible_text()


# -- records -------------------------------------------------------------------------------------------------------


def unique(prefix: str) -> str:
	return f"{prefix} {frappe.generate_hash(length=8)}"


def committed_task(case, function: str = "say_hello", **values) -> str:
	"""A Task the web server sees (committed), removed with its logs, schedules and requests after the test."""
	frappe.set_user("Administrator")
	values.setdefault("desc_short", unique(f"desk {function}"))
	task = make_task(function, **values)
	frappe.db.commit()
	case.addCleanup(delete_committed, task.name)
	return task.name


def in_zone(case, person: Person, zone: str) -> None:
	"""The person's own time zone (User.time_zone) is `zone` until the test ends; their next page load shows it."""
	set_zone(LOGINS[person].email, zone)
	case.addCleanup(set_zone, LOGINS[person].email, "")


def set_zone(email: str, zone: str) -> None:
	user = frappe.get_doc("User", email)
	user.time_zone = zone
	user.save(ignore_permissions=True)
	frappe.db.commit()


def datetime_pattern() -> str:
	"""The strftime pattern of a Datetime as the Desk shows it and a person types it: the site's date format, then
	HH:mm:ss."""
	date_format = frappe.db.get_single_value("System Settings", "date_format") or "dd-mm-yyyy"
	return date_format.replace("yyyy", "%Y").replace("dd", "%d").replace("mm", "%m") + " %H:%M:%S"


def typed_datetime(moment: datetime) -> str:
	return moment.strftime(datetime_pattern())


def fresh_value(doctype: str, filters, field="name"):
	"""A value as the web server committed it by now: the test's own transaction would keep showing what it read
	before."""
	frappe.db.rollback()
	return frappe.db.get_value(doctype, filters, field)


# -- a worker ------------------------------------------------------------------------------------------------------

# The bench's queues are shared by every site on it, and other tests leave their jobs there; a burst worker on one
# would run them all first. This takes only the job the person queued (if no other worker has taken it yet) onto a
# queue of its own and runs a burst SimpleWorker there: the job runs as any worker runs it (Frappe's execute_job).
PERFORM_ONE_JOB = """
import sys
import frappe
from frappe.utils.background_jobs import get_redis_conn
from rq import Queue, SimpleWorker
from rq.job import Job

site, job_id, private = sys.argv[1:]
frappe.init(site)  # v16's get_redis_conn reads the site's config
connection = get_redis_conn()
frappe.destroy()
job = Job.fetch(job_id, connection=connection)
if Queue(job.origin, connection=connection).remove(job):
	queue = Queue(private, connection=connection)
	queue.enqueue_job(job)
	SimpleWorker([queue], connection=connection).work(burst=True)
"""


def perform_job(job_id: str) -> None:
	"""Run the queued job `job_id` in a worker process of this bench, now; returns when that worker stopped."""
	done = subprocess.run(
		[sys.executable, "-c", PERFORM_ONE_JOB, frappe.local.site, job_id, f"btu-desk-test:{uuid.uuid4()}"],
		cwd=os.path.join(frappe.utils.get_bench_path(), "sites"),
		capture_output=True,
		text=True,
		timeout=patient(120),
	)
	if done.returncode:
		raise AssertionError(f"the worker exited {done.returncode}: {done.stdout[-2000:]}{done.stderr[-2000:]}")
