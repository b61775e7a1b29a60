"""Run one job the person queued, in a worker process of this bench, as the bench's workers run it."""

from __future__ import annotations

import os
import subprocess
import sys
import uuid

import frappe

from btu.btu_core.tests.utils import patient

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
