"""DeskTestCase: the site's web server, the three people, and one logged-in browser per person, for a test class.

What a test makes for the browser to see must be committed (the web server is another process); each test removes
what it made. After each test every open browser's console must hold no error.
"""

from __future__ import annotations

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


class DeskTestCase(IntegrationTestCase):
	server: DeskServer
	browsers: dict[Person, DeskBrowser]

	@classmethod
	def setUpClass(cls):
		if why := unavailable():
			if os.environ.get("CI"):  # .ci/run installs the browser: its absence there is a failure, not a skip
				raise RuntimeError(why)
			raise unittest.SkipTest(why)
		super().setUpClass()
		frappe.set_user("Administrator")
		make_people()
		cls.server = DeskServer(frappe.local.site).start()
		cls.browsers = {}

	@classmethod
	def tearDownClass(cls):
		for browser in cls.browsers.values():
			browser.close()
		cls.server.stop()
		super().tearDownClass()

	def tearDown(self):
		errors = {browser.email: browser.take_console_errors() for browser in self.browsers.values()}
		frappe.set_user("Administrator")
		super().tearDown()
		self.assertEqual({email: found for email, found in errors.items() if found}, {}, "JavaScript console errors")

	def as_person(self, person: Person) -> DeskBrowser:
		"""That person's browser, logged in through /login the first time it is asked for."""
		if person not in self.browsers:
			self.browsers[person] = DeskBrowser(self.server.url, LOGINS[person].email).login()
		return self.browsers[person]
