"""Bad rows, paused sites and sites coming and going, with a scheduler process running throughout."""

from __future__ import annotations

import json
import shutil
import time

import pymysql
import pytest

from btu.scheduler_daemon.reads.bench import Bench
from btu.shared import protocol
from devbench import bench as devbench
from devbench.data import SiteData
from tests.engine.helpers import ONE_SECOND, recent_fires, state_names, status_json, text, wait_until
from tests.support.keys import KEYS

REFRESH = ("--full-refresh-interval-secs", "2")


def newest_fire_ms(r, site: str) -> int:
	fires = recent_fires(r, site)
	return fires[-1]["enqueued_ms"] if fires else 0


def wait_quiet(r, site: str, timeout: float = 20) -> None:
	"""Until the site has not fired for 2.5 s (its schedules fire every second)."""
	wait_until(lambda: time.time() * 1000 - newest_fire_ms(r, site) > 2500, timeout, f"{site} stops firing", 0.2)


def wait_firing(r, site: str, since_ms: float, timeout: float = 20) -> None:
	wait_until(lambda: newest_fire_ms(r, site) > since_ms, timeout, f"{site} fires again", 0.1)


def test_bad_rows_are_reported_and_the_good_one_fires(engine_bench, processes, r):
	bench, data = engine_bench()
	site = data.site.name
	task = data.insert_task(
		function_string="tests.engine.tasks.record", arguments={"key": "test:runs"}, desc_short="record"
	)
	bad_json_task = data.insert_task(
		function_string="tests.engine.tasks.record", arguments="{key: 1", desc_short="bad json"
	)
	cron = {"run_frequency": "Cron Style", "cron_string": ONE_SECOND}
	bad = {
		data.insert_schedule(task, run_frequency="Cron Style", cron_string="61 * * * *"): "61",
		data.insert_schedule(task, time_zone="Mars/Olympus", **cron): "Mars/Olympus",
		data.insert_schedule("BTU-99999", **cron): "BTU-99999",
		data.insert_schedule(bad_json_task, **cron): "not valid JSON",
		data.insert_schedule(task, queue_name="nosuch", **cron): "nosuch",
	}
	good = data.insert_schedule(task, **cron)
	scheduler = processes.scheduler(bench.path, *REFRESH)
	wait_until(lambda: len(recent_fires(r, site)) >= 3, 30, "the good schedule fires")
	time.sleep(2.5)  # another full reconcile or two over the same bad rows
	assert scheduler.alive()
	assert state_names(r, site) == {good}
	assert {f["schedule"] for f in recent_fires(r, site)} == {good}
	invalid = status_json(bench.path)["sites"][site]["invalid"]
	assert set(invalid) == set(bad)
	log = scheduler.log()
	for name, named in bad.items():
		assert named in invalid[name], f"{name}: the reason names the bad input: {invalid[name]}"
		assert f" invalid_schedule site={site} schedule={name} " in log


@pytest.mark.slow
def test_paused_and_disabled_sites_stop_firing_and_resume(engine_bench, processes, r):
	bench, data = engine_bench()
	site = data.site.name
	task = data.insert_task(
		function_string="tests.engine.tasks.record", arguments={"key": "test:runs"}, desc_short="record"
	)
	data.insert_schedule(task, run_frequency="Cron Style", cron_string=ONE_SECOND)
	config_path = bench.path / "sites" / site / "site_config.json"
	original = config_path.read_text()
	scheduler = processes.scheduler(bench.path, *REFRESH)
	wait_firing(r, site, 0, 30)

	def held_reason():
		stored = r.get(KEYS.status)
		return json.loads(stored)["sites"].get(site, {}).get("paused_reason") if stored else None

	for switch in ("maintenance_mode", "pause_scheduler", "BTU Configuration.enabled"):
		if switch.startswith("BTU"):
			data.set_single("BTU Configuration", "enabled", 0)
		else:
			config_path.write_text(json.dumps({**json.loads(original), switch: 1}, indent=1))
		wait_quiet(r, site)
		wait_until(lambda: held_reason() and switch in held_reason(), 10, f"status says {switch} holds the site")
		resumed = time.time() * 1000
		if switch.startswith("BTU"):
			data.set_single("BTU Configuration", "enabled", 1)
		else:
			config_path.write_text(original)
		wait_firing(r, site, resumed)
	assert scheduler.alive()
	log = scheduler.log()
	held = [line for line in log.splitlines() if "site_held" in line]
	assert len(held) == 3 and all(f"site={site}" in line for line in held), held
	assert log.count("site_resumed") == 3


def test_sites_added_and_removed_while_running(engine_bench, processes, r, db_settings, redis_url):
	bench, data = engine_bench()
	first = data.site.name
	task = data.insert_task(
		function_string="tests.engine.tasks.record", arguments={"key": "test:runs"}, desc_short="record"
	)
	data.insert_schedule(task, run_frequency="Cron Style", cron_string=ONE_SECOND)
	scheduler = processes.scheduler(bench.path, *REFRESH)
	wait_firing(r, first, 0, 30)
	second = "site2.localhost"
	second_db = devbench.database_name(bench.path, second)
	try:
		devbench.create_dev_bench(bench.path, (first, second), redis_url=redis_url, **db_settings)
		with SiteData(Bench.load(bench.path), second) as other:
			other_task = other.insert_task(function_string="tests.engine.tasks.record", arguments={"key": "test:runs"})
			other.insert_schedule(other_task, run_frequency="Cron Style", cron_string=ONE_SECOND)
		wait_firing(r, second, 0)
		assert second in status_json(bench.path)["sites"]
		shutil.rmtree(bench.path / "sites" / second)
		wait_until(lambda: second not in {text(s) for s in r.smembers(KEYS.sites)}, 15, f"{second} dropped")
		assert r.exists(KEYS.recent_fires_key(second)) == 0
		assert second not in status_json(bench.path)["sites"]
		since = time.time() * 1000
		wait_firing(r, first, since)
		assert scheduler.alive()
	finally:
		conn = pymysql.connect(
			host=db_settings["db_host"], port=db_settings["db_port"], user=db_settings["db_root_user"],
			password=db_settings["db_root_password"], autocommit=True,
		)  # fmt: skip
		with conn, conn.cursor() as cur:
			cur.execute(f"DROP DATABASE IF EXISTS `{second_db}`")
			for host in devbench.DB_USER_HOSTS:
				cur.execute("DROP USER IF EXISTS %s@%s", (second_db, host))
