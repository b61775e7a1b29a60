"""A bench of hundreds of sites on a MariaDB with a low max_connections, and edits during a long reconcile.

The scheduler must fire every site while holding no more than `db_max_connections` connections to the
server, so that Frappe's own clients still get theirs; and an RPC edit must not wait for a full reconcile.
"""

from __future__ import annotations

import json
import threading
import time

import pymysql
import pytest

from btu.scheduler_daemon.store import jobs
from btu.shared import protocol
from devbench.data import SiteData
from tests.engine.helpers import ONE_SECOND, queue_ids, queue_key, wait_until
from tests.scale.test_connections import held
from tests.support.keys import KEYS

# Job ids, which name the site, take the installed rq's form.
pytestmark = pytest.mark.versions

SITE_COUNT = 200


def connections_reported(r) -> list[dict] | None:
	"""The scheduler's connections per database server, from its heartbeat, once its first full reconcile is counted."""
	for process_id in r.zrange(KEYS.processes, 0, -1):
		info = json.loads(r.get(KEYS.process_key(process_id.decode())) or "{}")
		if any(pool["peak"] for pool in info.get("databases", [])):
			return info["databases"]
	return None


def sites_fired(r, bench) -> set[str]:
	"""Sites with a job on the bench's default queue (its id in the installed rq's form names the site)."""
	return {jobs.parse_job_id(job_id)[0] for job_id in queue_ids(r, queue_key(bench))}


@pytest.mark.slow
def test_every_site_fires_within_the_bound_and_others_still_connect(mariadb, engine_bench, processes, r):
	server = mariadb(max_connections=30)
	sites = [f"s{i:03d}.localhost" for i in range(SITE_COUNT)]
	bench, _ = engine_bench(*sites, db_port=server.port)
	for site in sites:
		with SiteData(bench, site) as data:
			task = data.insert_task(
				function_string="tests.engine.tasks.record", arguments={"key": "test:runs"}, desc_short="record"
			)
			data.insert_schedule(task, run_frequency="Cron Style", cron_string=ONE_SECOND)

	peak, stop = [0], threading.Event()

	def watch() -> None:
		while not stop.is_set():
			peak[0] = max(peak[0], held(server))
			time.sleep(0.005)

	watcher = threading.Thread(target=watch)
	watcher.start()
	try:
		scheduler = processes.scheduler(bench.path, "--db-max-connections", "4", "--full-refresh-interval-secs", "1")
		# A cold start reads and compiles 200 sites; on a loaded 2-core machine that takes a while.
		wait_until(lambda: sites_fired(r, bench) >= set(sites), 240, "every site's first fire", interval=0.5)
		# Frappe's web and worker processes need the rest of the server's connections, all at once if they like.
		others = [server.connect() for _ in range(20)]
		for conn in others:
			conn.close()
		time.sleep(3)  # full reconciles every second meanwhile: each reads every site
		[pool] = wait_until(lambda: connections_reported(r), 30, "the scheduler's heartbeat with its connections")
		# Mid-slice (all 200 sites a second here): the stop waits for one site at most, not for the slice.
		assert scheduler.stop() == 0
	finally:
		stop.set()
		watcher.join()
	assert pool["limit"] == 4 and 1 <= pool["peak"] <= 4, f"the scheduler had {pool['peak']} connections open at once"
	# A connection closed to make room for another site's is still counted by the server until it has read the
	# client's quit, so the server may briefly list one such connection per reading thread beside the four.
	assert 1 <= peak[0] <= 2 * 4, f"the server listed {peak[0]} connections of the scheduler at once"
	log = scheduler.log()
	assert "database_unreachable" not in log and "database_busy" not in log and "Traceback" not in log
	assert server.status("Connection_errors_max_connections") == 0


def test_an_edit_lands_while_a_full_reconcile_is_stuck_on_another_site(engine_bench, processes, r, db_settings):
	bench, _ = engine_bench("stuck.localhost", "edited.localhost")
	with SiteData(bench, "stuck.localhost") as stuck:
		task = stuck.insert_task(function_string="tests.engine.tasks.record", desc_short="record")
		stuck.insert_schedule(task, run_frequency="Cron Style", cron_string="0 3 * * *")
	scheduler = processes.scheduler(bench.path, "--full-refresh-interval-secs", "1")
	wait_until(
		lambda: r.scard(KEYS.site_schedules_key("stuck.localhost")) == 1,
		30,
		"the first site's schedule in the state",
	)

	# A write lock on the first site's schedule table: the next full reconcile's read of that site waits on it.
	config = bench.site("stuck.localhost").db_params
	locker = pymysql.connect(
		host=db_settings["db_host"],
		port=db_settings["db_port"],
		user=config["user"],
		password=config["password"],
		database=config["database"],
	)
	try:
		with locker.cursor() as cur:
			cur.execute("LOCK TABLES `tabBTU Task Schedule` WRITE, `tabBTU Task` WRITE, `tabBTU Calendar` WRITE")

		def reconcile_waiting() -> bool:
			with (
				pymysql.connect(
					host=db_settings["db_host"],
					port=db_settings["db_port"],
					user="root",
					password=db_settings["db_root_password"],
				) as root,
				root.cursor() as cur,
			):
				cur.execute(
					"SELECT COUNT(*) FROM information_schema.processlist "
					"WHERE user = %s AND state LIKE 'Waiting for table%%'",
					(config["user"],),
				)
				return cur.fetchone()[0] > 0

		wait_until(reconcile_waiting, 30, "a full reconcile waiting on the locked table")
		with SiteData(bench, "edited.localhost") as edited:
			other_task = edited.insert_task(function_string="tests.engine.tasks.record", desc_short="record")
			name = edited.insert_schedule(other_task, run_frequency="Cron Style", cron_string="0 4 * * *")
		reply = protocol.call(r, KEYS, protocol.CREATE_TASK_SCHEDULE, name, site="edited.localhost")
		assert reply.ok, reply.message
		wait_until(lambda: r.sismember(KEYS.site_schedules_key("edited.localhost"), name), 10, "the edit in the state")
		assert reconcile_waiting(), "the full reconcile was to be still waiting: the edit did not wait for it"
	finally:
		locker.close()
	assert scheduler.stop() == 0
