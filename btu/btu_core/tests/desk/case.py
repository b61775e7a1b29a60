"""DeskTestCase: the site's web server, the three people, and one logged-in browser per person.

They are made once per run-tests process and shared by every browser test class (Desk), and ended at its exit: a
login costs a person seconds, and every class would pay it again. What a test makes for the browser to see must be
committed (the web server is another process); each test removes what it made. After each test every open
browser's console must hold no error.
"""

from __future__ import annotations

import atexit
import os
import unittest

import frappe

from btu.btu_core.tests.desk.browser import DeskBrowser, chromium_available
from btu.btu_core.tests.desk.people import LOGINS, Person, make_people
from btu.btu_core.tests.desk.web_server import DeskServer

try:
	from frappe.tests import IntegrationTestCase
except ImportError:
	from frappe.tests.utils import FrappeTestCase as IntegrationTestCase

try:
	import selenium  # noqa: F401
except ImportError:
	selenium = None


def unavailable() -> str | None:
	if selenium is None:
		return "selenium is not installed in the bench's env (scripts/tier2 installs it)"
	return chromium_available()


class Desk:
	"""The web server and the people's browsers of this process, made on first use and ended at its exit."""

	server: DeskServer | None = None
	browsers: dict[Person, DeskBrowser] = {}

	@classmethod
	def open(cls) -> DeskServer:
		if cls.server is None:
			if not cls.browsers:
				make_people()
				atexit.register(cls.close)
			cls.server = DeskServer(frappe.local.site).start()
			for browser in cls.browsers.values():
				browser.base_url = cls.server.url
		return cls.server

	@classmethod
	def new_server(cls) -> DeskServer:
		"""A web server started now, for a class that changed the site's config (v16's keeps it for 60 s); the
		browsers stay logged in, as a session's cookie is the host's whatever the port."""
		# Each page left open would call the old server (Frappe's deferred route history) once it is gone.
		for browser in cls.browsers.values():
			browser.driver.get("about:blank")
		if cls.server is not None:
			cls.server.stop()
			cls.server = None
		return cls.open()

	@classmethod
	def browser(cls, person: Person) -> DeskBrowser:
		"""That person's browser, logged in through /login the first time it is asked for."""
		if person not in cls.browsers:
			cls.browsers[person] = DeskBrowser(cls.open().url, LOGINS[person].email).login()
		return cls.browsers[person]

	@classmethod
	def close(cls) -> None:
		for browser in cls.browsers.values():
			browser.close()
		cls.browsers.clear()
		if cls.server is not None:
			cls.server.stop()
			cls.server = None


class DeskTestCase(IntegrationTestCase):
	server: DeskServer
	browsers = Desk.browsers

	@classmethod
	def setUpClass(cls):
		if why := unavailable():
			if os.environ.get("CI"):  # .ci/run installs the browser: its absence there is a failure, not a skip
				raise RuntimeError(why)
			raise unittest.SkipTest(why)
		super().setUpClass()
		frappe.set_user("Administrator")
		cls.server = Desk.open()

	def tearDown(self):
		errors = {browser.email: browser.take_console_errors() for browser in self.browsers.values()}
		frappe.set_user("Administrator")
		super().tearDown()
		self.assertEqual({email: found for email, found in errors.items() if found}, {}, "JavaScript console errors")

	def as_person(self, person: Person) -> DeskBrowser:
		return Desk.browser(person)
