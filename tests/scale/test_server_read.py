"""The bench's reader login: many sites' settings and checksums in one query per server, and never a site lost to it.

Counted by the server, not by the scheduler: a MariaDB of the test's own with `userstat` counts each login's
SELECTs, so the test sees whose login read what. Then the reader is broken every way an operator could:
a site made after the grants, a grant revoked while running, a wrong password, and look-alike grant patterns.
"""

from __future__ import annotations

import json
import time

import pymysql
import pytest

from btu.scheduler_daemon.reads import db_reader
from btu.scheduler_daemon.reads.server_read import READER_PASSWORD_KEY, READER_USER_KEY, Grants, like_pattern
from btu.shared import protocol
from devbench.bench import create_dev_bench
from devbench.data import SiteData
from tests.conftest import APPS
from tests.engine.helpers import ONE_SECOND, cli, queue_key, wait_until
from tests.scale.test_many_sites import sites_fired
from tests.support.keys import KEYS

SITE_COUNT = 12
READER = "btu_reader_test"


def selects_by_user(server) -> dict[str, int]:
	with server.connect() as conn, conn.cursor() as cur:
		cur.execute("SELECT USER, SELECT_COMMANDS FROM information_schema.USER_STATISTICS")
		return {user: int(count) for user, count in cur.fetchall()}


def schedule_every_second(bench, site: str) -> str:
	with SiteData(bench, site) as data:
		task = data.insert_task(
			function_string="tests.engine.tasks.record", arguments={"key": "test:runs"}, desc_short="record"
		)
		return data.insert_schedule(task, run_frequency="Cron Style", cron_string=ONE_SECOND)


def grant_reader(bench) -> None:
	done = cli(bench.path, "setup", "db-reader", "--apply", "--user", READER)
	assert done.returncode == 0, done.stdout + done.stderr


@pytest.mark.slow
def test_the_reader_reads_every_site_and_a_site_it_may_not_read_still_fires(
	mariadb, engine_bench, processes, r, db_settings
):
	server = mariadb(userstat=1)
	sites = [f"s{i:02d}.localhost" for i in range(SITE_COUNT)]
	bench, _ = engine_bench(*sites, db_port=server.port)
	for site in sites:
		schedule_every_second(bench, site)
	grant_reader(bench)
	assert json.loads((bench.path / "sites" / "common_site_config.json").read_text())[READER_USER_KEY] == READER

	scheduler = processes.scheduler(bench.path, "--full-refresh-interval-secs", "1")
	wait_until(lambda: sites_fired(r, bench) >= set(sites), 60, "every site's first fire", interval=0.5)
	site_users = {bench.site(site).db_params["user"] for site in sites}
	# Each site's own login reads it once (which tables it has); then the reader reads them all, a query a slice.
	time.sleep(2)
	before = selects_by_user(server)
	time.sleep(4)  # four cycles over every site
	after = selects_by_user(server)
	own = {user: after.get(user, 0) - before.get(user, 0) for user in site_users}
	assert sum(own.values()) == 0, f"sites read on their own logins while the reader may read them: {own}"
	assert after.get(READER, 0) - before.get(READER, 0) >= 2, "the reader read nothing"

	# A row written by SQL alone (no RPC) is seen through the reader's checksums.
	added = schedule_every_second(bench, sites[3])
	wait_until(
		lambda: r.sismember(KEYS.site_schedules_key(sites[3]), added),
		15,
		"the new row in the state through the reader's read",
	)

	# A site made after the grants: the reader may not read it, so its own login does, and it fires.
	create_dev_bench(
		bench.path,
		[*sites, "late.localhost"],
		**{**db_settings, "db_port": server.port, "bench_id": bench.bench_id, "apps": APPS},
	)
	schedule_every_second(bench, "late.localhost")
	wait_until(lambda: "late.localhost" in sites_fired(r, bench), 30, "the site made after the grants fires")

	# A grant revoked while running: that batch is refused, its sites are read on their own logins, none is lost.
	revoked = bench.site(sites[5]).db_params["database"]
	with server.connect() as conn, conn.cursor() as cur:
		for host in db_reader.USER_HOSTS:
			cur.execute(f"REVOKE SELECT ON `{revoked}`.`tabSingles` FROM %s@%s", (READER, host))
	wait_until(lambda: " db_reader_refused " in scheduler.log(), 30, "the refused batch logged")
	# A row of the revoked site written by SQL alone: read on the site's own login now, it is compiled and fires.
	moved = schedule_every_second(bench, sites[5])
	wait_until(
		lambda: r.sismember(KEYS.site_schedules_key(sites[5]), moved), 30, "the revoked site's new row in the state"
	)
	r.delete(queue_key(bench))
	wait_until(lambda: sites_fired(r, bench) >= {*sites, "late.localhost"}, 30, "every site fires after the revoke")
	assert scheduler.stop(timeout=30) == 0
	log = scheduler.log()
	assert "database_unreachable" not in log and "Traceback" not in log


def test_the_reader_may_read_only_the_btu_tables(mariadb, engine_bench):
	server = mariadb()
	bench, _ = engine_bench("a.localhost", db_port=server.port)
	grant_reader(bench)
	config = json.loads((bench.path / "sites" / "common_site_config.json").read_text())
	database = bench.site("a.localhost").db_params["database"]
	reader = pymysql.connect(
		host="127.0.0.1", port=server.port, user=config[READER_USER_KEY], password=config[READER_PASSWORD_KEY]
	)
	with reader, reader.cursor() as cur:
		cur.execute(f"SELECT COUNT(*) FROM `{database}`.`tabBTU Task Schedule`")
		for table in ("__Auth", "tabUser", "tabBTU Task Log"):
			with pytest.raises(pymysql.err.MySQLError):
				cur.execute(f"SELECT 1 FROM `{database}`.`{table}` LIMIT 1")
		with pytest.raises(pymysql.err.MySQLError):
			cur.execute(f"INSERT INTO `{database}`.`tabBTU Task Schedule` (name) VALUES ('x')")


def test_a_wrong_reader_password_costs_speed_not_a_site(mariadb, engine_bench, processes, r):
	server = mariadb()
	sites = ("a.localhost", "b.localhost")
	bench, _ = engine_bench(*sites, db_port=server.port)
	for site in sites:
		schedule_every_second(bench, site)
	grant_reader(bench)
	path = bench.path / "sites" / "common_site_config.json"
	config = json.loads(path.read_text())
	path.write_text(json.dumps({**config, READER_PASSWORD_KEY: "wrong"}))
	scheduler = processes.scheduler(bench.path, "--full-refresh-interval-secs", "1")
	wait_until(lambda: sites_fired(r, bench) >= set(sites), 30, "every site fires")
	time.sleep(3)
	assert scheduler.stop() == 0
	log = scheduler.log()
	assert log.count(" db_reader_refused ") == 1, "a refused reader is logged once"
	assert "database_unreachable" not in log


@pytest.mark.parametrize("user", ["x'; DROP USER root; --", "a b", "", "a" * 81])
def test_a_hostile_reader_name_is_refused(engine_bench, user):
	bench, _ = engine_bench("a.localhost")
	done = cli(bench.path, "setup", "db-reader", "--user", user)
	assert done.returncode == 2, done.stdout + done.stderr
	assert "--user" in done.stderr


def test_grant_patterns_match_as_mariadb_does():
	assert like_pattern(r"\_btu%").fullmatch("_btu1234")
	assert not like_pattern(r"\_btu%").fullmatch("xbtu1234"), "an escaped _ is a literal"
	assert like_pattern("_btu%").fullmatch("xbtu1234"), "an unescaped _ is any one character"
	assert not like_pattern("site.db").fullmatch("siteXdb"), "a dot is no wildcard"
	grants = Grants(tables=frozenset({("_a", "tabSingles"), ("_a", "tabBTU Task Schedule")}))
	assert grants.may_read("_a", ("tabSingles", "tabBTU Task Schedule"))
	assert not grants.may_read("_a", ("tabSingles", "tabBTU Task Schedule", "tabBTU Task")), "every table is needed"
	assert not grants.may_read("_ab", ("tabSingles",)), "a look-alike database is another"


def test_grant_statements_quote_hostile_names():
	login = db_reader.ReaderLogin("reader", "pa'ss\\word")
	[grant] = [db_reader.Grant("s", "db`; DROP DATABASE x; --", "tabSingles")]
	sql = db_reader.statements(login, [grant], hosts=("%",))
	assert sql[0] == "CREATE USER IF NOT EXISTS 'reader'@'%' IDENTIFIED BY 'pa\\'ss\\\\word'"
	assert sql[2] == "GRANT SELECT ON `db``; DROP DATABASE x; --`.`tabSingles` TO 'reader'@'%'"
