"""Task outcomes for Prometheus and Frappe's monitor: written after each run, served by `scrape`.

Every worker process runs tasks, so the counts live in Redis (`task_outcomes`): a
finished run adds its outcome to this site's hash on the queue Redis in one round trip, and
`scrape` reads that hash into Prometheus's text format. Prometheus authenticates as a user
holding "BTU Metrics Reader" with that user's API key and secret (README, "Task outcomes").
Neither recording nor the monitor entry ever fails a run.
"""

import time
from functools import partial

import frappe
import frappe.monitor
from frappe import _

from btu.btu_core.insights import task_outcomes
from btu.btu_core.scheduler_link import bench_keys, redis_queue_shown
from btu.btu_core.setup.roles import BTU_METRICS_READER_ROLE, METRICS_ROLES, require_any_role
from btu.shared.redis_urls import mask_url


def outcome_redis():
	"""The queue Redis as Frappe's get_redis_conn gives it, tried once: its retries (5 tries 1 s apart in v15
	and v16) would hold every run 4 s while that Redis is down, for a count."""
	from frappe.utils.background_jobs import get_redis_conn

	return getattr(get_redis_conn, "__wrapped__", get_redis_conn)()


def record_outcome(task: str, status: str, duration_s: float | None = None, start_lag_s: float | None = None) -> None:
	"""Add one finished run to this site's outcome hash; a failure is logged in one line and swallowed."""
	try:
		with outcome_redis().pipeline(transaction=True) as pipe:
			task_outcomes.record(
				pipe, bench_keys(), frappe.local.site, task, status, duration_s, start_lag_s, time.time()
			)
			pipe.execute()
	except Exception as exc:
		frappe.logger("btu").warning(
			f"site={frappe.local.site} task={task} status={status} not counted for Prometheus: "
			f"Redis at {redis_queue_shown()} failed ({type(exc).__name__}: {mask_url(str(exc))})"
		)


def forget_task(task: str) -> None:
	"""Once the current transaction (deleting `task`) commits, remove the Task's fields from this site's
	outcome hash, so the hash shrinks with the Tasks. Its series end at once anyway: `scrape` serves only
	Tasks that exist. Tried once; a failure is logged in one line, never the deletion's."""
	frappe.db.after_commit.add(partial(_forget, frappe.local.site, task))


def _forget(site: str, task: str) -> None:
	try:
		task_outcomes.forget(outcome_redis(), bench_keys(), site, task)
	except Exception as exc:
		frappe.logger("btu").warning(
			f"site={site} task={task} deleted, its outcome counts not removed from Redis at {redis_queue_shown()} "
			f"({type(exc).__name__}: {mask_url(str(exc))}); they stay in the hash, never served"
		)


def add_to_monitor(**data) -> None:
	"""Add `data` as "btu" to this job's (or request's) monitor entry; nothing when the monitor is off.
	The monitor is Frappe's: whatever it raises is logged, never a failed run."""
	try:
		frappe.monitor.add_data_to_monitor(btu=data)
	except Exception as exc:
		frappe.logger("btu").warning(
			f"site={frappe.local.site} monitor entry not extended: {type(exc).__name__}: {exc}"
		)


@frappe.whitelist(allow_guest=True, methods=["GET"])
def scrape():
	"""This site's task outcomes in Prometheus's text format.

	Guest is let in only to be refused here with a message that says what to send; the role check
	admits System Manager, BTU Manager and BTU Metrics Reader.
	"""
	if frappe.session.user == "Guest":
		frappe.throw(
			_(
				"BTU's metrics need a login: send the header Authorization: token API_KEY:API_SECRET of a user with "
				"the role {0}"
			).format(_(BTU_METRICS_READER_ROLE)),
			frappe.PermissionError,
			title=_("Not permitted"),
		)
	require_any_role(
		METRICS_ROLES,
		_(
			"User {0} may not read BTU's metrics: this needs one of the roles {1} (ask a System Manager to add it in "
			"the user's Roles)"
		),
	)
	# Imported here: every run's end imports this module to count its outcome, and a forked work-horse would pay for
	# prometheus_client on each run.
	from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, generate_latest
	from werkzeug.wrappers import Response

	# Only Tasks that exist: a deleted Task's series end, so the series stay as many as the Tasks.
	tasks = set(frappe.get_all("BTU Task", pluck="name"))
	registry = CollectorRegistry()
	registry.register(
		task_outcomes.TaskOutcomes(outcome_redis, bench_keys(), frappe.local.site, tasks, frappe.logger("btu"))
	)
	return Response(generate_latest(registry), content_type=CONTENT_TYPE_LATEST)
