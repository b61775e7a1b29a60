"""Records the tier-2 tests build."""

from __future__ import annotations

import json
import os
import signal
import subprocess
from contextlib import contextmanager

import frappe
from frappe.installer import update_site_config

SAMPLES = "btu.btu_core.tests.sample_tasks"


def patient(seconds: float) -> float:
	"""`seconds` widened by the suite's one slack factor, BTU_TEST_SLACK (tier 1 reads and checks it in
	tests/support/slack.py, which the bench's Python cannot import)."""
	return seconds * max(1.0, float(os.environ.get("BTU_TEST_SLACK") or 1))


def sealed_value(doctype: str, name: str | None, field: str) -> str | None:
	"""A sealed field's value as stored (btu.shared.sealed): its column is always NULL."""
	from btu.btu_core.sealed import store

	return store.read(doctype, [name] if name else []).get(name, {}).get(field)


def make_task(function: str = "say_hello", **values):
	return frappe.get_doc(
		{
			"doctype": "BTU Task",
			"desc_short": f"test {function}",
			"function_string": f"{SAMPLES}.{function}",
			"queue_name": "default",
			"max_task_duration": 60,
			**values,
		}
	).insert()


def make_schedule(task: str, **values):
	return frappe.get_doc(
		{
			"doctype": "BTU Task Schedule",
			"task": task,
			"enabled": 0,
			"run_frequency": "Daily",
			"hour": 2,
			"minute": 30,
			"time_zone": "UTC",
			**values,
		}
	).insert()


def make_user(email: str, roles: tuple[str, ...] = ()):
	if frappe.db.exists("User", email):
		user = frappe.get_doc("User", email)
	else:
		user = frappe.get_doc(
			{"doctype": "User", "email": email, "first_name": email.split("@")[0], "send_welcome_email": 0}
		)
		user.insert(ignore_permissions=True)
	user.set("roles", [])
	for role in roles:
		user.append("roles", {"role": role})
	user.save(ignore_permissions=True)
	return user


def delete_committed(task: str) -> None:
	"""Remove a Task the runner committed, with its schedules and logs."""
	frappe.db.rollback()
	frappe.db.delete("BTU Run Request", {"task": task})
	frappe.db.delete("BTU Task Log", {"task": task})
	for name in frappe.get_all("BTU Task Schedule", filters={"task": task}, pluck="name"):
		frappe.delete_doc("BTU Task Schedule", name, force=True, ignore_permissions=True)
	frappe.delete_doc("BTU Task", task, force=True, ignore_permissions=True)
	from btu.btu_core.sealed import store

	for doctype in ("BTU Run Request", "BTU Task Log"):
		store.forget_orphans(doctype)
	frappe.db.commit()


def stop_processes(processes) -> None:
	"""SIGTERM every process still running (all at once: each stops as a deploy stops it), then wait for each; one
	that outlives the slack-widened 30 s is killed."""
	live = [process for process in processes if process is not None and process.poll() is None]
	for process in live:
		process.send_signal(signal.SIGTERM)
	for process in live:
		try:
			process.wait(patient(30))
		except subprocess.TimeoutExpired:
			process.kill()
			process.wait()


def stop_scheduled_job_types(case) -> None:
	"""The site's running Scheduled Job Types stopped for `case`'s test, started again after it: switched on, BTU
	fires every due one at once, and their runs would queue ahead of what the test watches (on a loaded machine, for
	minutes) or be left queued for the next test to drain."""
	running = frappe.get_all("Scheduled Job Type", {"stopped": 0}, pluck="name")
	frappe.db.set_value("Scheduled Job Type", {"name": ("in", running)}, "stopped", 1)
	frappe.db.commit()

	def start_again():
		frappe.db.rollback()
		frappe.db.set_value("Scheduled Job Type", {"name": ("in", running)}, "stopped", 0)
		frappe.db.commit()

	case.addCleanup(start_again)


def other_connection(case):
	"""A second session on the site's database, as another worker would have (PyMySQL: MariaDB only, else the test is
	skipped)."""
	import pymysql

	conf = frappe.conf
	if (conf.db_type or "mariadb") != "mariadb":
		case.skipTest("the second session is opened with PyMySQL: MariaDB only")
	return pymysql.connect(
		host=conf.db_host or "127.0.0.1",
		port=int(conf.db_port or 3306),
		user=conf.db_user or conf.db_name,
		password=conf.db_password,
		database=conf.db_name,
	)


@contextmanager
def site_config(**values):
	"""`values` in this site's config, both where v15 reads the queue Redis's settings (the config in memory,
	frappe.local.conf) and where v16's get_redis_conn reads them (site_config.json, read again on each call); the
	file and memory are as they were afterwards, and Frappe's kept queue client is dropped both times."""
	from frappe.utils import background_jobs

	with open(frappe.get_site_path("site_config.json")) as file:
		on_disk = json.load(file)
	in_memory = {key: frappe.local.conf.get(key) for key in values if key in frappe.local.conf}
	for key, value in values.items():
		update_site_config(key, value)
	frappe.local.conf.update(values)
	background_jobs._redis_queue_conn = None
	try:
		yield
	finally:
		for key in values:
			update_site_config(key, on_disk.get(key, "None"))  # "None" removes the key
			frappe.local.conf.pop(key, None)
		frappe.local.conf.update(in_memory)
		background_jobs._redis_queue_conn = None
