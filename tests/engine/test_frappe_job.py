"""The frappe executor writes what Frappe v15's `frappe.enqueue` writes, read back with rq's own Job API."""

from __future__ import annotations

import json

import pytest
from rq import Queue
from rq.job import Job

from btu.scheduler_daemon.store import jobs
from btu.shared.instants import slot_text
from tests.engine.helpers import ONE_SECOND, queue_ids, queue_key, wait_until

pytestmark = pytest.mark.versions


def test_job_hash_is_frappe_v15_enqueue(engine_bench, processes, r):
	bench, data = engine_bench()
	site = data.site.name
	common = bench.path / "sites" / "common_site_config.json"
	config = json.loads(common.read_text())
	config["workers"] = {"btu_custom": {"timeout": 900}}
	common.write_text(json.dumps(config, indent=1))
	bench = type(bench).load(bench.path)
	timed = data.insert_task(
		function_string="tests.engine.tasks.record", arguments={"a": 1}, max_task_duration=123, desc_short="timed"
	)
	untimed = data.insert_task(
		function_string="tests.engine.tasks.record_slowly", max_task_duration=0, desc_short="untimed"
	)
	on_default = data.insert_schedule(timed, run_frequency="Cron Style", cron_string=ONE_SECOND)
	on_custom = data.insert_schedule(
		untimed, run_frequency="Cron Style", cron_string=ONE_SECOND, queue_name="btu_custom"
	)
	processes.scheduler(bench.path, executor="frappe")

	cases = ((on_default, timed, "default", 123), (on_custom, untimed, "btu_custom", 900))
	for schedule, task, queue_type, timeout in cases:
		key = queue_key(bench, queue_type)
		job_id = wait_until(lambda: queue_ids(r, key), 30, f"a job on {key}")[0]
		job = Job.fetch(job_id, connection=r)
		queue = bench.queue_name(queue_type)
		assert queue == f"{bench.common_config['bench_id']}:{queue_type}"
		assert job.origin == queue
		assert queue in [q.name for q in Queue.all(connection=r)]
		assert job_id in Queue(queue, connection=r).job_ids
		# Frappe's own "<site>::" (v15) or "<site>||" (v16) where the installed rq takes it.
		assert job_id.startswith(f"{jobs.ID_FORM.escape(site)}{jobs.ID_FORM.between}")
		assert job.func_name == "frappe.utils.background_jobs.execute_job"
		assert set(job.kwargs) == {"site", "user", "method", "event", "job_name", "is_async", "kwargs"}
		assert job.kwargs["site"] == site
		assert job.kwargs["user"] == "Administrator"
		assert job.kwargs["is_async"] is True
		assert job.kwargs["method"] == job.kwargs["job_name"] == "btu.btu_core.task_runner.run_scheduled_task"
		inner = job.kwargs["kwargs"]
		assert set(inner) == {"task", "schedule", "slot", "fire_at"}
		of_site, named, slot = jobs.parse_job_id(job_id)
		assert (inner["task"], inner["schedule"], named, of_site) == (task, schedule, schedule, site)
		assert inner["slot"] == slot_text(slot)
		assert inner["slot"].endswith("Z") and inner["fire_at"] == inner["slot"]
		assert Job.fetch(job_id, connection=r).get_status() == "queued"
		assert job.timeout == timeout
		assert job.result_ttl == 600
		assert job.failure_ttl == 604800
		assert job._failure_callback_name == "frappe.utils.background_jobs.truncate_failed_registry"
		assert job.enqueued_at is not None
