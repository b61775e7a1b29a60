"""A MariaDB server of the test's own, for what must not touch the machine's shared one (a low max_connections)."""

from __future__ import annotations

import shutil
import subprocess
import tempfile
import time
from pathlib import Path

import pymysql

from tests.support.ports import claim_port
from tests.support.slack import patient


class MariaDBServer:
	"""`mariadbd` on a claimed port with its data in a temporary directory; root logs in without a password over TCP."""

	def __init__(self, max_connections: int = 151, **options):
		self.max_connections = max_connections
		self.options = (
			options  # more server options, e.g. userstat=1 (per-user counts in information_schema.USER_STATISTICS)
		)
		self.dir = Path(tempfile.mkdtemp(prefix="btu-mariadb-"))
		self.port = claim_port()
		self.process: subprocess.Popen | None = None

	def start(self) -> MariaDBServer:
		data, tmp = self.dir / "data", self.dir / "tmp"
		tmp.mkdir()
		# One options file for both: the machine's own (user=mysql, its datadir) is never read, and each server
		# has its own tmpdir (two bootstraps in one /tmp collide on their temporary tables).
		options = self.dir / "my.cnf"
		options.write_text(
			"[mysqld]\n"
			+ "".join(
				f"{key} = {value}\n"
				for key, value in {
					"datadir": data,
					"tmpdir": tmp,
					"user": "root",
					"bind-address": "127.0.0.1",
					"port": self.port,
					"socket": self.dir / "mysqld.sock",
					"pid-file": self.dir / "mysqld.pid",
					"max-connections": self.max_connections,
					"innodb-buffer-pool-size": "64M",
					"innodb-log-file-size": "16M",
					"log-error": self.dir / "error.log",
					# Room for every table of a few hundred sites: a test measures the scheduler, not table reopening.
					"table-open-cache": 8000,
					"table-definition-cache": 4000,
					**self.options,
				}.items()
			)
			+ "skip-log-bin\nskip-name-resolve\n"
		)
		done = subprocess.run(
			[
				"mariadb-install-db",
				f"--defaults-file={options}",
				"--auth-root-authentication-method=normal",
				"--skip-test-db",
			],
			capture_output=True,
			text=True,
		)
		if done.returncode != 0:
			raise RuntimeError(f"mariadb-install-db failed: {done.stderr[-2000:]}")
		self.process = subprocess.Popen(
			["mariadbd", f"--defaults-file={options}"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
		)
		deadline = time.monotonic() + patient(30)
		while time.monotonic() < deadline and self.process.poll() is None:
			try:
				with self.connect() as conn, conn.cursor() as cur:
					cur.execute("SELECT @@datadir")
					if Path(cur.fetchone()[0]).resolve() == data.resolve():  # ours, not another server on the port
						return self
			except pymysql.MySQLError:
				time.sleep(0.05)
		log = (self.dir / "error.log").read_text(errors="replace")[-2000:] if (self.dir / "error.log").exists() else ""
		self.close()
		raise RuntimeError(f"mariadbd did not start on port {self.port}: {log}")

	def connect(self, **kwargs) -> pymysql.Connection:
		return pymysql.connect(
			host="127.0.0.1", port=self.port, user="root", password="", autocommit=True, connect_timeout=5, **kwargs
		)

	def status(self, name: str) -> int:
		with self.connect() as conn, conn.cursor() as cur:
			cur.execute("SHOW GLOBAL STATUS LIKE %s", (name,))
			return int(cur.fetchone()[1])

	def close(self) -> None:
		if self.process is not None and self.process.poll() is None:
			self.process.terminate()
			try:
				self.process.wait(timeout=patient(30))
			except subprocess.TimeoutExpired:
				self.process.kill()
				self.process.wait()
		shutil.rmtree(self.dir, ignore_errors=True)
