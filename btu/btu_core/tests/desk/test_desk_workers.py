"""Where the scheduler runs, on BTU Configuration's status panel (issue 42), as each manager sees it: a Frappe
worker's candidate leads; then a dedicated `btu-scheduler run` leads in preference and the candidate stands by.

The worker is this bench's own `frappe worker`, which starts its candidate as every worker does
(btu/scheduler_daemon/leading/worker_candidate.py); it listens to the short queue, where this suite queues nothing.
"""

from __future__ import annotations

import os
import signal
import subprocess
import time
from pathlib import Path

from frappe.utils import get_bench_path

from btu.btu_core import scheduler_link
from btu.btu_core.scheduler_link import bench_keys
from btu.btu_core.tests.desk.case import DeskTestCase
from btu.btu_core.tests.desk.forms import open_form
from btu.btu_core.tests.desk.people import Person
from btu.btu_core.tests.utils import patient, stop_processes
from btu.scheduler_daemon.leading import worker_candidate
from btu.shared import liveness

CONFIGURATION = "/app/btu-configuration"
MANAGERS = (Person.SYSTEM_MANAGER, Person.BTU_MANAGER)


class TestWhereTheSchedulerRuns(DeskTestCase):
	def setUp(self):
		self.bench = Path(get_bench_path())
		self.started: list[subprocess.Popen] = []

	def tearDown(self):
		stop_processes(self.started)
		redis = scheduler_link.queue_redis()
		deadline = time.monotonic() + patient(20)
		while any(p.get("pid") in {s.pid for s in self.started} for p in liveness.processes(redis, bench_keys())):
			if time.monotonic() > deadline:
				break
			time.sleep(0.2)
		super().tearDown()

	def spawn(self, name: str, *args: str, env: dict) -> subprocess.Popen:
		log = open(self.bench / "logs" / f"btu-desk-{name}.log", "w")
		process = subprocess.Popen(
			[str(self.bench / "env" / "bin" / "python"), *args],
			cwd=self.bench / "sites",
			stdout=log,
			stderr=subprocess.STDOUT,
			env=env,
		)
		log.close()
		self.started.append(process)
		return process

	def leader(self) -> dict:
		return liveness.leader(scheduler_link.queue_redis(), bench_keys()) or {}

	def wait_for(self, predicate, what: str, seconds: float = 60) -> None:
		deadline = time.monotonic() + patient(seconds)
		while not predicate():
			if time.monotonic() > deadline:
				self.fail(f"timed out after {patient(seconds)} s: {what}")
			time.sleep(0.2)

	def panel_shows(self, person: Person, *texts: str) -> None:
		"""The panel, refreshed as a person clicks Refresh Status until it shows `texts` (the leader publishes its
		status every few seconds)."""
		browser = self.as_person(person)
		open_form(browser, CONFIGURATION, "BTU Configuration")
		browser.wait_for_texts("Scheduler Status")

		def shown():
			if all(browser.shows(text) for text in texts):
				return True
			browser.click_button("Refresh Status")
			browser.wait_for_idle()
			return False

		browser.wait(shown, f"the status panel showing {texts}", seconds=patient(30))

	def test_managers_see_a_worker_lead_then_a_dedicated_scheduler_lead_in_preference(self):
		worker = self.spawn(
			"worker",
			"-m",
			"frappe.utils.bench_helper",
			"frappe",
			"worker",
			"--queue",
			"short",
			env={**os.environ, worker_candidate.ENV: "1"},
		)
		self.wait_for(lambda: self.leader().get("worker_pid") == worker.pid, "the worker's candidate leads")
		in_worker = f"Frappe worker (pid {worker.pid})"
		for person in MANAGERS:
			with self.subTest(person=person):
				self.panel_shows(person, "Scheduler alive", in_worker)

		dedicated = self.spawn(
			"dedicated", "-m", "btu.scheduler_daemon", "run", "--bench", str(self.bench), env=dict(os.environ)
		)
		self.wait_for(lambda: self.leader().get("pid") == dedicated.pid, "the dedicated scheduler leads")
		for person in MANAGERS:
			with self.subTest(person=person):
				self.panel_shows(person, "Dedicated process", in_worker, "standby")
