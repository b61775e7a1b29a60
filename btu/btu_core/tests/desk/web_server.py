"""The site's own web server for a browser test: `bench --site S serve` on a free port, for the test class's life.

The browser talks to the same code a person's Desk does (Frappe's WSGI app, the built assets under sites/assets);
socket.io is not started, so realtime messages do not arrive and the Desk's attempts to reach it are not errors.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request

import frappe

from btu.btu_core.tests.utils import patient


def free_port() -> int:
	with socket.socket() as probe:
		probe.bind(("127.0.0.1", 0))
		return probe.getsockname()[1]


class DeskServer:
	"""`frappe serve` for this site at http://127.0.0.1:<port>, stopped (with its process group) by stop()."""

	def __init__(self, site: str):
		self.site = site
		self.port = free_port()
		self.url = f"http://127.0.0.1:{self.port}"
		self.log_path = os.path.join(frappe.utils.get_bench_path(), "logs", f"btu-desk-test-{self.port}.log")
		self.process: subprocess.Popen | None = None

	def start(self) -> DeskServer:
		with open(self.log_path, "wb") as log:
			self.process = subprocess.Popen(
				[sys.executable, "-m", "frappe.utils.bench_helper", "frappe", "--site", self.site, "serve"]
				+ ["--port", str(self.port), "--noreload"],
				cwd=os.path.join(frappe.utils.get_bench_path(), "sites"),
				stdout=log,
				stderr=subprocess.STDOUT,
				start_new_session=True,
			)
		deadline = time.monotonic() + patient(60)
		while time.monotonic() < deadline:
			if self.process.poll() is not None:
				raise RuntimeError(f"the web server for {self.site} exited {self.process.returncode}: {self.tail()}")
			try:
				with urllib.request.urlopen(f"{self.url}/api/method/ping", timeout=5) as reply:
					if reply.status == 200:
						return self
			except OSError:
				time.sleep(0.2)
		self.stop()
		raise RuntimeError(f"the web server for {self.site} did not answer /api/method/ping in time: {self.tail()}")

	def stop(self) -> None:
		if self.process and self.process.poll() is None:
			os.killpg(self.process.pid, signal.SIGTERM)
			try:
				self.process.wait(timeout=patient(10))
			except subprocess.TimeoutExpired:
				os.killpg(self.process.pid, signal.SIGKILL)
				self.process.wait()
		self.process = None

	def tail(self, size: int = 3000) -> str:
		try:
			with open(self.log_path, "rb") as log:
				log.seek(0, os.SEEK_END)
				log.seek(max(0, log.tell() - size))
				return log.read().decode(errors="replace")
		except OSError:
			return ""
