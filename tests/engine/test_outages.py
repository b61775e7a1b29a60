"""Redis stopped and restarted (with and without its data), the database unreachable: the scheduler lives on.

BTU_DB_OUTAGE_SECONDS (default 30) sets how long the database stays unreachable.
"""

from __future__ import annotations

import json
import os
import time

import pytest

from btu.scheduler_daemon.store.outcomes import JobOutcome
from tests.engine.helpers import (
	ONE_SECOND,
	counters,
	duplicates,
	gaps,
	queue_ids,
	queue_key,
	slots_by_schedule,
	status_json,
	wait_until,
)  # fmt: skip
from tests.engine.test_failover import every_second_schedules
from tests.support.redis_server import RedisServer
from tests.support.tcp_proxy import TcpProxy

pytestmark = pytest.mark.versions

DB_OUTAGE_SECONDS = float(os.environ.get("BTU_DB_OUTAGE_SECONDS", "30"))


def fired_after(client, key: str, moment_ms: float) -> list[str]:
	return [i for i in queue_ids(client, key) if slots_by_schedule([i]).popitem()[1][0] > moment_ms]


@pytest.mark.slow
@pytest.mark.parametrize("wipe", [False, True], ids=["keeps-data", "loses-data"])
def test_redis_down_for_10_seconds(wipe, engine_bench, processes):
	server = RedisServer(persistent=True).start()
	try:
		bench, data = engine_bench(redis_url=server.url)
		client = server.client()
		key = queue_key(bench)
		names = every_second_schedules(data, 3)
		scheduler = processes.scheduler(bench.path)
		wait_until(lambda: len(queue_ids(client, key)) >= 9, 30, "three fires of each schedule")
		before = queue_ids(client, key)
		server.restart(wipe=wipe, down_for=10)
		restarted_ms = time.time() * 1000
		assert scheduler.alive(), "the scheduler exited while Redis was down"
		wait_until(lambda: len(fired_after(client, key, restarted_ms)) >= 3 * len(names), 40, "fires after the restart")
		assert scheduler.alive()
		assert scheduler.stop() == 0
		after = queue_ids(client, key)
		log = scheduler.log()
	finally:
		server.close()
	assert log.count(" redis_unreachable ") == 1, "the outage is logged once"
	assert " redis_restored " in log
	if wipe:
		ids = before + after
		assert " state_rebuild " in log
		rebuilt = slots_by_schedule(after)
		assert sorted(rebuilt) == sorted(names), "every schedule is back from the database"
		assert all(gaps(slots) == [] for slots in rebuilt.values())
	else:
		ids = after
		assert ids[: len(before)] == before
		kept = slots_by_schedule(ids)
		assert all(gaps(kept[name]) == [] for name in names), "fire_all caught up every slot missed meanwhile"
	assert duplicates(ids) == [], "a slot was enqueued twice"


def test_redis_rebuilt_state_shows_in_status(engine_bench, processes):
	"""After Redis lost its data, `btu-scheduler status` lists the site's schedules again."""
	server = RedisServer(persistent=True).start()
	try:
		bench, data = engine_bench(redis_url=server.url)
		site = data.site.name
		names = every_second_schedules(data, 2)
		processes.scheduler(bench.path)
		wait_until(
			lambda: status_json(bench.path)["sites"].get(site, {}).get("schedules") == 2,
			30,
			"status lists the schedules",
		)
		server.restart(wipe=True, down_for=2)
		summary = wait_until(
			lambda: (lambda s: s if s["sites"].get(site, {}).get("schedules") == len(names) and s["leader"] else None)(
				status_json(bench.path)
			),
			30,
			"status lists the rebuilt schedules",
		)
		assert {f["schedule"] for f in summary["sites"][site]["next_fires"]} == set(names)
	finally:
		server.close()


@pytest.mark.slow
def test_database_unreachable_firing_goes_on_and_reconcile_resumes(engine_bench, processes, r, db_settings):
	bench, data = engine_bench()
	site = data.site.name
	key = queue_key(bench)
	task = data.insert_task(
		function_string="tests.engine.tasks.record", arguments={"key": "test:runs"}, desc_short="record"
	)
	steady = data.insert_schedule(
		task, run_frequency="Cron Style", cron_string=ONE_SECOND, catch_up_policy="fire_all", catch_up_max=100
	)
	proxy = TcpProxy(db_settings["db_host"], db_settings["db_port"])
	proxy.up()
	try:
		config_path = bench.path / "sites" / site / "site_config.json"
		config = json.loads(config_path.read_text())
		config.update({"db_host": "127.0.0.1", "db_port": proxy.port})
		config_path.write_text(json.dumps(config, indent=1))
		scheduler = processes.scheduler(bench.path, "--full-refresh-interval-secs", "2")
		wait_until(lambda: queue_ids(r, key), 30, "a first fire")
		proxy.down()
		down_ms = time.time() * 1000
		wait_until(lambda: " database_unreachable " in scheduler.log(), 15, "the outage is logged")
		# `data` connects straight to MariaDB (its site config was read before the proxy was put in).
		late = data.insert_schedule(task, run_frequency="Cron Style", cron_string=ONE_SECOND)
		time.sleep(max(0.0, DB_OUTAGE_SECONDS - (time.time() * 1000 - down_ms) / 1000))
		assert scheduler.alive()
		during = slots_by_schedule(fired_after(r, key, down_ms)).get(steady, [])
		assert len(during) >= DB_OUTAGE_SECONDS - 3, "firing went on from the Redis state"
		assert late not in slots_by_schedule(queue_ids(r, key))
		proxy.up()
		up_ms = time.time() * 1000
		wait_until(
			lambda: late in slots_by_schedule(queue_ids(r, key)), 20, "the schedule added during the outage fires"
		)
		wait_until(lambda: " database_restored " in scheduler.log(), 10, "the recovery is logged")
		assert min(slots_by_schedule(queue_ids(r, key))[late]) > up_ms - 1000
		time.sleep(1.5)
		assert scheduler.alive()
		assert scheduler.stop() == 0
	finally:
		proxy.down()
	ids = queue_ids(r, key)
	assert duplicates(ids) == []
	assert gaps(slots_by_schedule(ids)[steady]) == [], "no slot of the steady schedule was lost"
	assert counters(r, site).get(JobOutcome.DUPLICATE, 0) == 0
	assert scheduler.log().count(" ERROR database_unreachable ") == 1, "the outage is logged once"
