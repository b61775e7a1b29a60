"""Every edit the full pass must notice changes what it reads of a site, on the site's own login and through the reader.

A full reconcile reads a site's settings and the summary (row count, checksum) of what fires before anything else,
and reads no row when both are as the last pass left them (`SiteSync.begin_site`): the safety net behind the
after-commit RPC. So every kind of edit is made here by SQL alone, as an admin's or a migrate's would be, and each
must move the site's `SiteSettings`: a run request added on a site that had none, its task and its schedule edited,
it leaving the pending state and being deleted, a schedule's task and calendar edited, a schedule paused without its
stamp, a Scheduled Job Type edited, and each value of tabSingles the scheduler obeys. The site's own login
(`site_settings.read`) and the reader's batch (`server_read`) must read the same.
"""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

from btu.scheduler_daemon.operations.config import Config
from btu.scheduler_daemon.reads import site_settings
from btu.scheduler_daemon.reads.bench import Bench
from btu.scheduler_daemon.reads.database import SiteDatabase
from btu.scheduler_daemon.reads.server_read import reader_for
from btu.scheduler_daemon.reads.site_settings import SiteSettings
from btu.shared import run_requests as rr
from tests.engine.test_run_requests import insert_request
from tests.engine.test_scheduled_jobs import insert_job_type
from tests.scale.test_server_read import grant_reader

SITE = "a.localhost"


def test_every_edit_a_full_pass_must_notice_moves_the_site_read_both_ways(mariadb, engine_bench):
	server = mariadb()
	bench, data = engine_bench(SITE, db_port=server.port)
	data.set_single("System Settings", "time_zone", "UTC")
	data.set_single("System Settings", "enable_scheduler", 1)
	task = data.insert_task(function_string="tests.engine.tasks.record", desc_short="record")
	other_task = data.insert_task(function_string="tests.engine.tasks.record", desc_short="for requests only")
	calendar = data.insert("BTU Calendar", calendar_name="Plant", dates=[{"date": datetime.now(timezone.utc).date()}])
	schedule = data.insert_schedule(task, run_frequency="Cron Style", cron_string="0 3 * * *", calendar=calendar)
	insert_job_type(data, "every_minute", cron_format="* * * * *")
	grant_reader(bench)

	loaded = Bench.load(bench.path)
	connections = Config().connections()
	reader = reader_for(loaded.common_config, connections, None)
	assert reader is not None
	db = SiteDatabase(loaded.site(SITE), connections)

	def read() -> SiteSettings:
		own = site_settings.read(db, checksum=True, scheduled_jobs=True)
		batches, alone = reader.batches([db], {SITE: True})
		assert not alone and [[member.site.name for member in batch] for batch in batches] == [[SITE]]
		through_reader = reader.read(batches[0], {SITE: True})
		assert through_reader is not None, "the reader's batch was refused"
		assert through_reader[SITE] == own, "the reader and the site's own login read the site differently"
		return own

	def later() -> datetime:
		"""A `modified` stamp no earlier one equals."""
		return data.now() + timedelta(seconds=1)

	def sql(statement: str, *params) -> None:
		with data.conn.cursor() as cur:
			cur.execute(statement, params)

	try:
		first = read()
		assert set(first.summaries) == {"x", "r", "j"} and first.summaries["r"][0] == 0
		assert first.summaries["x"][0] == 1 and first.summaries["j"][0] == 1

		def moved(what: str, part: str | None, edit) -> SiteSettings:
			before = read()
			edit()
			after = read()
			assert after != before, f"{what}: not noticed"
			if part is not None:
				assert after.summaries[part] != before.summaries[part], f"{what}: not in the summary of part {part}"
			return after

		# Run requests, on a site that had none.
		request = insert_request(data, other_task, datetime.now(timezone.utc) + timedelta(hours=1))
		assert read().summaries["r"][0] == 1, "a pending run request added on a site that had none"
		moved(
			"the request's task edited",
			"r",
			lambda: data.update("BTU Task", other_task, desc_short="x", modified=later()),
		)
		moved(
			"the request's schedule set",
			"r",
			lambda: sql("UPDATE `tabBTU Run Request` SET `schedule`=%s WHERE name=%s", schedule, request),
		)
		moved(
			"the request's schedule edited",
			"r",
			lambda: data.update("BTU Task Schedule", schedule, schedule_description="z", modified=later()),
		)
		moved(
			"the request edited",
			"r",
			lambda: sql("UPDATE `tabBTU Run Request` SET `modified`=%s WHERE name=%s", later(), request),
		)
		after = moved(
			"the request no longer pending (no stamp)",
			"r",
			lambda: sql("UPDATE `tabBTU Run Request` SET `status`=%s WHERE name=%s", rr.DONE, request),
		)
		assert after.summaries["r"][0] == 0
		sql("UPDATE `tabBTU Run Request` SET `status`=%s WHERE name=%s", rr.PENDING, request)
		assert read().summaries["r"][0] == 1, "pending again"
		after = moved("the request deleted", "r", lambda: data.delete("BTU Run Request", request))
		assert after.summaries["r"][0] == 0

		# A schedule's task and calendar, and the schedule itself without its stamp.
		moved(
			"the schedule's task edited", "x", lambda: data.update("BTU Task", task, desc_short="y", modified=later())
		)
		moved(
			"the schedule's calendar edited",
			"x",
			lambda: data.update("BTU Calendar", calendar, description="edited", modified=later()),
		)
		moved(
			"the schedule paused (no stamp)",
			"x",
			lambda: sql("UPDATE `tabBTU Task Schedule` SET `paused`=1 WHERE name=%s", schedule),
		)
		moved(
			"a Scheduled Job Type's cron edited (no stamp)",
			"j",
			lambda: sql("UPDATE `tabScheduled Job Type` SET `cron_format`='*/5 * * * *' WHERE name='every_minute'"),
		)

		# The values of tabSingles the scheduler obeys.
		after = moved("BTU Configuration.enabled", None, lambda: data.set_single("BTU Configuration", "enabled", 0))
		assert not after.btu_enabled
		after = moved(
			"BTU Configuration.fire_frappe_jobs",
			None,
			lambda: data.set_single("BTU Configuration", "fire_frappe_jobs", 1),
		)
		assert after.fire_frappe_jobs
		after = moved(
			"System Settings.time_zone", None, lambda: data.set_single("System Settings", "time_zone", "Asia/Tokyo")
		)
		assert after.time_zone == "Asia/Tokyo"
		after = moved(
			"System Settings.enable_scheduler", None, lambda: data.set_single("System Settings", "enable_scheduler", 0)
		)
		assert not after.scheduler_enabled
	finally:
		connections.close_idle(everything=True)
