"""Services that do not answer when `btu-scheduler run` starts: it waits, says so once, and fires once they answer."""

from __future__ import annotations

import json
import signal
import time

import pytest

from devbench.data import SiteData
from tests.engine.helpers import ONE_SECOND, queue_ids, queue_key, slots_by_schedule, status_json, wait_until
from tests.reliability.helpers import site_job_ids
from tests.support.ports import claim_port
from tests.support.redis_server import RedisServer
from tests.support.slack import patient
from tests.support.tcp_proxy import TcpProxy

pytestmark = pytest.mark.versions

REFRESH = ("--full-refresh-interval-secs", "1")


def every_second(data) -> str:
	task = data.insert_task(function_string="tests.engine.tasks.record", arguments={"key": "test:runs"})
	return data.insert_schedule(task, run_frequency="Cron Style", cron_string=ONE_SECOND)


def test_redis_not_answering_at_start(engine_bench, processes):
	port = claim_port()
	bench, data = engine_bench(redis_url=f"redis://127.0.0.1:{port}/0")
	every_second(data)
	scheduler = processes.scheduler(bench.path)
	wait_until(lambda: " redis_unreachable " in scheduler.log(), 15, "the outage is logged")
	time.sleep(3)  # several retries (backoff 0.1, 0.2, 0.4 ... s)
	assert scheduler.alive(), "the scheduler exited while Redis was not answering"
	server = RedisServer(port=port).start()
	try:
		client = server.client()
		wait_until(lambda: queue_ids(client, queue_key(bench)), 20, f"a fire once Redis answers\n{scheduler.tail()}")
		assert scheduler.alive()
		assert scheduler.stop() == 0
		client.close()
	finally:
		server.close()
	log = scheduler.log()
	assert log.count(" redis_unreachable ") == 1, "the outage is logged once, not once per retry"
	assert log.count(" rpc_redis_lost ") <= 1
	assert f"Error 111 connecting to 127.0.0.1:{port}. Connection refused." in log
	# Which Redis, and which file to fix, are in the log from the start.
	common = bench.path / "sites" / "common_site_config.json"
	assert f' scheduler_config redis=redis://127.0.0.1:{port}/0 redis_from="redis_queue of {common}" ' in log
	assert " redis_restored " in log and " leader_elected " in log


def test_stop_while_redis_never_answered(engine_bench, processes):
	bench, data = engine_bench(redis_url=f"redis://127.0.0.1:{claim_port()}/0")
	every_second(data)
	scheduler = processes.scheduler(bench.path)
	wait_until(lambda: " redis_unreachable " in scheduler.log(), 15, "the outage is logged")
	started = time.monotonic()
	scheduler.signal(signal.SIGTERM)
	assert scheduler.process.wait(patient(10)) == 0
	assert time.monotonic() - started < 6, "SIGTERM waited for Redis"
	assert " scheduler_stopped " in scheduler.log() and "Traceback" not in scheduler.log()


def test_database_unreachable_at_start(engine_bench, processes, r, db_settings):
	"""site2's database is behind a proxy that is not up yet; site1 fires meanwhile; site2 fires once it is."""
	bench, data = engine_bench("site1.localhost", "site2.localhost")
	every_second(data)
	with SiteData(bench, "site2.localhost") as other:
		late = every_second(other)
	proxy = TcpProxy(db_settings["db_host"], db_settings["db_port"])
	config_path = bench.path / "sites" / "site2.localhost" / "site_config.json"
	config = json.loads(config_path.read_text())
	config_path.write_text(json.dumps({**config, "db_host": "127.0.0.1", "db_port": proxy.port}, indent=1))
	try:
		scheduler = processes.scheduler(bench.path, *REFRESH)
		wait_until(lambda: len(site_job_ids(r, bench, "site1.localhost")) >= 2, 30, "site1 fires")
		wait_until(lambda: " database_unreachable site=site2.localhost " in scheduler.log(), 10, "site2 is named")
		time.sleep(2)  # more full reconciles against the closed port
		log = scheduler.log()
		assert log.count(" database_unreachable ") == 1, "logged once, not once per reconcile"
		assert f"at 127.0.0.1:{proxy.port}" in log and "db_host, db_port" in log
		assert site_job_ids(r, bench, "site2.localhost") == []
		proxy.up()
		up_ms = time.time() * 1000
		wait_until(lambda: site_job_ids(r, bench, "site2.localhost"), 15, "site2 fires once its database answers")
		assert " database_restored site=site2.localhost" in scheduler.log()
		assert min(slots_by_schedule(site_job_ids(r, bench, "site2.localhost"))[late]) > up_ms - 1000
		site1_slots = slots_by_schedule(site_job_ids(r, bench, "site1.localhost"))
		assert all(b - a == 1000 for slots in site1_slots.values() for a, b in zip(sorted(slots), sorted(slots)[1:])), (
			"site1 missed slots"
		)
		assert scheduler.alive()
	finally:
		proxy.down()


@pytest.mark.parametrize("broken", ["database-unreachable", "site-config-unreadable"])
def test_status_names_a_site_it_cannot_serve_from_start(engine_bench, processes, r, broken):
	bench, data = engine_bench("site1.localhost", "site2.localhost")
	every_second(data)
	config_path = bench.path / "sites" / "site2.localhost" / "site_config.json"
	original = config_path.read_text()
	try:
		if broken == "database-unreachable":
			config_path.write_text(json.dumps({**json.loads(original), "db_port": claim_port()}))
		else:
			config_path.write_text("{")
		processes.scheduler(bench.path, *REFRESH)
		wait_until(lambda: site_job_ids(r, bench, "site1.localhost"), 30, "site1 fires")
		time.sleep(1.5)  # a full reconcile publishes the status
		entry = status_json(bench.path)["sites"].get("site2.localhost")
		assert entry is not None, "status --json does not list site2"
		assert entry.get("database") == "unreachable" or "site_config.json" in json.dumps(entry)
	finally:
		config_path.write_text(original)
