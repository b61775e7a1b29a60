"""One person's Desk in a real Chromium (Debian's chromium and chromium-driver), driven by clicking and typing.

Every wait is for what the person would wait for (a text, a button, a dialog) within the suite's slack factor; the
JavaScript console is read after each step, and any error but the socket.io noise of a bench without socketio fails
the test.
"""

from __future__ import annotations

import os
import re
import time
from collections.abc import Callable

import frappe
from selenium import webdriver
from selenium.common.exceptions import (
	ElementClickInterceptedException,
	ElementNotInteractableException,
	StaleElementReferenceException,
	TimeoutException,
)
from selenium.webdriver.chrome.service import Service
from selenium.webdriver.common.by import By
from selenium.webdriver.common.keys import Keys
from selenium.webdriver.remote.webelement import WebElement
from selenium.webdriver.support.ui import WebDriverWait

from btu.btu_core.tests.desk.people import PASSWORD
from btu.btu_core.tests.utils import patient

CHROMIUM = os.environ.get("BTU_CHROMIUM", "/usr/bin/chromium")
CHROMEDRIVER = os.environ.get("BTU_CHROMEDRIVER", "/usr/bin/chromedriver")
# A bench without socketio: the Desk's realtime client retries, and Chromium logs each refused attempt.
IGNORED_CONSOLE = re.compile(r"socket\.io|/socket\.io/|WebSocket connection|favicon\.ico", re.IGNORECASE)
SCREENSHOTS = os.environ.get("BTU_DESK_SCREENSHOTS")
FAILURES = os.path.join(frappe.utils.get_bench_path(), "logs", "btu-desk-failures")


def chromium_available() -> str | None:
	"""Why the browser tests cannot run here, or None."""
	for path in (CHROMIUM, CHROMEDRIVER):
		if not os.access(path, os.X_OK):
			return f"{path} is missing (apt-get install chromium chromium-driver)"
	return None


def xpath_text(text: str) -> str:
	"""`text` as an XPath string literal, whatever quotes it holds."""
	if "'" not in text:
		return f"'{text}'"
	if '"' not in text:
		return f'"{text}"'
	return "concat(" + ', "\'", '.join(f"'{part}'" for part in text.split("'")) + ")"


def button_xpath(label: str) -> str:
	"""A button, or a dropdown item, whose own text is `label`."""
	literal = xpath_text(label)
	return (
		f"//button[normalize-space()={literal}]"
		f" | //a[contains(@class, 'dropdown-item')][normalize-space()={literal}]"
		f" | //button[.//span[normalize-space()={literal}]]"
	)


class DeskBrowser:
	"""A headless Chromium logged in at /login as one person."""

	def __init__(self, base_url: str, email: str):
		self.base_url = base_url
		self.email = email
		options = webdriver.ChromeOptions()
		options.binary_location = CHROMIUM
		for flag in (
			"--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--disable-quic",
			"--no-first-run", "--disable-background-networking", "--disable-component-update", "--disable-sync",
			"--window-size=1400,1000", "--lang=en-US",
		):  # fmt: skip
			options.add_argument(flag)
		options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
		self.driver = webdriver.Chrome(service=Service(CHROMEDRIVER), options=options)
		self.expected: list[re.Pattern] = []

	def close(self) -> None:
		self.driver.quit()

	# -- waiting -------------------------------------------------------------------------------------------------

	def wait(self, condition: Callable[[], object], what: str, seconds: float = 20):
		"""condition()'s first truthy answer; fails naming `what` after `seconds` (widened by the slack factor)."""
		last_error: Exception | None = None
		deadline = time.monotonic() + patient(seconds)
		while time.monotonic() < deadline:
			try:
				answer = condition()
				if answer:
					return answer
			except (StaleElementReferenceException, ElementNotInteractableException) as exc:
				last_error = exc
			time.sleep(0.1)
		picture = self.failure_picture()
		visible = self.visible_text()[-1500:]
		raise TimeoutException(
			f"{self.email}: waited for {what}; last error {last_error!r}; screenshot {picture};"
			f" the page shows: {visible}"
		)

	def visible_text(self) -> str:
		try:
			return self.driver.find_element(By.TAG_NAME, "body").text
		except Exception:
			return ""

	def shows(self, text: str) -> bool:
		"""Whether the page shows `text`, in any letter case (styles upper-case card titles and labels)."""
		return text.casefold() in self.visible_text().casefold()

	def wait_for_text(self, text: str, seconds: float = 20) -> None:
		self.wait(lambda: self.shows(text), f"the text {text!r}", seconds)

	def wait_for_texts(self, *texts: str) -> None:
		"""Until the page shows every one of `texts` (any letter case), read in one go from the page's rendered text."""
		wanted = [text.casefold() for text in texts]

		def missing():
			shown = self.driver.execute_script("return document.body.innerText").casefold()
			return [text for text in wanted if text not in shown]

		self.wait(lambda: not missing(), f"the texts {texts}")

	def wait_for_idle(self) -> None:
		"""Until Frappe has no request in flight and no freeze is shown."""
		self.wait(
			lambda: self.driver.execute_script(
				"return window.frappe && frappe.request && !(frappe.request.ajax_count > 0)"
				" && !document.querySelector('.freeze-message-container:not(.hide), #freeze.in')"
			),
			"the page to finish its requests",
		)

	# -- navigating ----------------------------------------------------------------------------------------------

	def login(self) -> DeskBrowser:
		self.driver.get(f"{self.base_url}/login")
		self.type_into(self.displayed(By.ID, "login_email"), self.email)
		self.type_into(self.displayed(By.ID, "login_password"), PASSWORD)
		self.click_shown(By.CSS_SELECTOR, ".btn-login")
		# v15's Desk is at /app, v16's at /desk (its /app redirects there).
		self.wait(lambda: re.search(r"/(app|desk)(/|$)", self.driver.current_url), "the Desk after logging in")
		self.wait(lambda: self.driver.execute_script("return !!(window.frappe && frappe.boot)"), "the Desk to boot")
		return self

	def open(self, path: str) -> None:
		"""Go to a Desk route as a person typing it into the address bar, e.g. "/app/btu-task/new"."""
		self.driver.get(f"{self.base_url}{path}")
		self.wait(lambda: self.driver.execute_script("return document.readyState") == "complete", f"{path} to load")
		self.wait_for_idle()

	def slow_network(self, latency_ms: int) -> None:
		"""Every request takes `latency_ms` more each way (0: as fast as it is), as on a distant person's line."""
		self.driver.execute_cdp_cmd("Network.enable", {})
		self.driver.execute_cdp_cmd(
			"Network.emulateNetworkConditions",
			{"offline": False, "latency": latency_ms, "downloadThroughput": -1, "uploadThroughput": -1},
		)

	def request_in_flight(self) -> None:
		"""Until the page has a request on its way (polled in the page: a slow network keeps it there for a while)."""
		self.wait(
			lambda: self.driver.execute_script("return !!(window.frappe && frappe.request.ajax_count > 0)"),
			"a request on its way",
		)

	def route(self) -> str:
		return self.driver.execute_script("return frappe.get_route_str()")

	# -- finding and clicking ------------------------------------------------------------------------------------

	def displayed(self, by: str, selector: str, seconds: float = 20) -> WebElement:
		def found():
			for element in self.driver.find_elements(by, selector):
				if element.is_displayed():
					return element
			return None

		return self.wait(found, f"{selector} to be shown", seconds)

	def all_displayed(self, by: str, selector: str) -> list[WebElement]:
		return [element for element in self.driver.find_elements(by, selector) if element.is_displayed()]

	def centre(self, element: WebElement) -> None:
		"""Scroll `element` to the middle of the window, as a person does before clicking: Selenium scrolls it only to
		the top edge, where the Desk's sticky navbar takes the click (a form's toolbar after its page scrolled)."""
		self.driver.execute_script("arguments[0].scrollIntoView({block: 'center'})", element)

	def click(self, element: WebElement) -> None:
		def clicked():
			try:
				self.centre(element)
				element.click()
			except ElementClickInterceptedException:
				return False
			return True

		self.wait(clicked, f"a click on {element.tag_name} {element.text!r}")

	def click_shown(self, by: str, selector: str) -> None:
		"""Click the first shown element `selector` finds, found again on each try: the Desk redraws lists and
		toolbars as their data arrives, and an element found before a redraw can no longer be clicked."""

		def clicked():
			shown = self.all_displayed(by, selector)
			if not shown:
				return False
			try:
				self.centre(shown[0])
				shown[0].click()
			except (ElementClickInterceptedException, StaleElementReferenceException):
				return False
			return True

		self.wait(clicked, f"a click on {selector}")

	def button(self, label: str, seconds: float = 20) -> WebElement:
		"""A shown button (or a dropdown item) whose own text is `label`."""
		return self.displayed(By.XPATH, button_xpath(label), seconds)

	def click_button(self, label: str, group: str | None = None) -> None:
		"""Click a form's button; one in a group (Actions, Skip, Alerts) after opening the group's menu."""
		if group:
			self.click_shown(By.XPATH, button_xpath(group))
		self.click_shown(By.XPATH, button_xpath(label))
		self.wait_for_idle()

	def field(self, fieldname: str, within: WebElement | None = None) -> WebElement:
		"""The input of a form or dialog field, by its fieldname."""
		root = f".modal.show [data-fieldname='{fieldname}']" if within is None and self.dialog_open() else None
		selector = root or f"[data-fieldname='{fieldname}']"
		return self.displayed(By.CSS_SELECTOR, f"{selector} input, {selector} textarea, {selector} select, "
			f"{selector} .ace_text-input, {selector} .ql-editor")  # fmt: skip

	def dialog_open(self) -> bool:
		return bool(self.all_displayed(By.CSS_SELECTOR, ".modal.show"))

	def type_into(self, element: WebElement, text: str) -> None:
		self.click(element)
		element.send_keys(Keys.CONTROL, "a")
		element.send_keys(Keys.DELETE)
		element.send_keys(text)

	def fill(self, fieldname: str, text: str, *, blur: bool = True) -> None:
		"""Type `text` into a field as a person does, and leave the field (Tab) so the form takes it."""
		element = self.field(fieldname)
		if element.tag_name == "select":
			self.choose(fieldname, text)
			return
		self.type_into(element, text)
		if blur:
			if not self.dialog_open():  # Escape closes a dialog (on a form it closes a datepicker or suggestions)
				element.send_keys(Keys.ESCAPE)
			element.send_keys(Keys.TAB)
		self.wait_for_idle()

	def choose(self, fieldname: str, option: str) -> None:
		"""Pick an option of a Select field."""
		element = self.field(fieldname)
		self.click(element)
		self.click(element.find_element(By.XPATH, f".//option[normalize-space()={xpath_text(option)}]"))
		self.wait_for_idle()

	def link(self, fieldname: str, value: str) -> None:
		"""Fill a Link field by typing and picking the suggestion, as a person does."""
		element = self.field(fieldname)
		self.type_into(element, value)
		literal = xpath_text(value)
		# Frappe v15's awesomplete draws each suggestion as a div with role option, not an li.
		suggestion = (
			f"//ul[contains(@class, 'awesomplete') or @role='listbox']//*[self::li or @role='option']"
			f"[.//*[normalize-space()={literal}] or normalize-space()={literal} or contains(., {literal})]"
		)
		self.click_shown(By.XPATH, suggestion)
		self.wait_for_idle()

	def check(self, fieldname: str, ticked: bool = True) -> None:
		element = self.field(fieldname)
		if element.is_selected() != ticked:
			self.click(element)
		self.wait_for_idle()

	def save(self) -> None:
		"""Ctrl+S, as a person saves a form."""
		self.driver.find_element(By.TAG_NAME, "body").send_keys(Keys.CONTROL, "s")
		self.wait_for_idle()

	def value(self, fieldname: str):
		"""The open form's saved-or-edited value of a field (what the form holds)."""
		return self.driver.execute_script("return cur_frm && cur_frm.doc[arguments[0]]", fieldname)

	def dialog_text(self, seconds: float = 20) -> str:
		"""The text of the shown dialog (msgprint, prompt, confirm)."""
		return self.displayed(By.CSS_SELECTOR, ".modal.show .modal-content", seconds).text

	# -- the console and screenshots -----------------------------------------------------------------------------

	def expect_console(self, pattern: str) -> None:
		"""A console error this test's step causes on purpose (Frappe's 404 for a page a person may not open), allowed
		until the test ends."""
		self.expected.append(re.compile(pattern))

	def take_console_errors(self) -> list[str]:
		"""The console's errors since the last call, but the socket.io noise of a bench without socketio and what the
		test expected."""
		allowed = [IGNORED_CONSOLE, *self.expected]
		self.expected = []
		return [
			entry["message"]
			for entry in self.driver.get_log("browser")
			if entry.get("level") == "SEVERE"
			and not any(pattern.search(entry.get("message", "")) for pattern in allowed)
		]

	def failure_picture(self) -> str:
		"""What the person saw when a wait failed, saved beside the bench's logs."""
		folder = os.path.join(FAILURES, re.sub(r"\W+", "-", self.email))
		os.makedirs(folder, exist_ok=True)
		path = os.path.join(folder, f"{time.strftime('%Y%m%d-%H%M%S')}.png")
		self.driver.save_screenshot(path)
		return path

	def screenshot(self, name: str) -> None:
		"""Save what the person sees as <BTU_DESK_SCREENSHOTS>/<name>.png (the README's pictures), when set."""
		if SCREENSHOTS:
			os.makedirs(SCREENSHOTS, exist_ok=True)
			self.driver.save_screenshot(os.path.join(SCREENSHOTS, f"{name}.png"))
