"""Database connections bounded per server (scheduler_daemon/reads/connections.py), against a MariaDB of the test's own.

Every site has its own database user, as `bench new-site` makes them, so the server's process list tells
which site each connection serves and how many the scheduler holds.
"""

from __future__ import annotations

import json
import random
import threading
import time

import pytest

from btu.scheduler_daemon.reads.connections import Connections
from btu.scheduler_daemon.reads.database import DatabaseBusy, DatabaseError, SiteDatabase, connect
from tests.support.slack import patient

SITES = tuple(f"s{i}.localhost" for i in range(12))


def held(server) -> int:
	"""Connections the sites' users hold on the server (the dev bench's users are named _btu...)."""
	with server.connect() as conn, conn.cursor() as cur:
		cur.execute(r"SELECT COUNT(*) FROM information_schema.processlist WHERE user LIKE '\_btu%'")
		return int(cur.fetchone()[0])


@pytest.fixture
def bench_on_own_server(mariadb, make_bench):
	server = mariadb(max_connections=30)
	return server, make_bench(*SITES, db_port=server.port)


def databases(bench, connections) -> list[SiteDatabase]:
	return [SiteDatabase(bench.site(name), connections) for name in bench.site_names()]


def test_many_threads_on_many_sites_never_hold_more_than_the_bound(bench_on_own_server):
	server, bench = bench_on_own_server
	connections = Connections(connect, limit=3)
	dbs = databases(bench, connections)
	errors, peak, stop = [], [0], threading.Event()

	def reader() -> None:
		while not stop.is_set():
			db = random.choice(dbs)
			try:
				# Each read holds its connection 50 ms: eight readers certainly want more than three at once.
				[row] = db.query("SELECT DATABASE() AS db, SLEEP(0.05) AS slept")
				assert row["db"] == db.site.db_params["database"], "a connection of another site answered"
			except Exception as exc:  # noqa: BLE001 - every failure is the test's finding
				errors.append(exc)

	def watch() -> None:
		while not stop.is_set():
			peak[0] = max(peak[0], held(server))
			time.sleep(0.01)

	threads = [threading.Thread(target=reader) for _ in range(8)] + [threading.Thread(target=watch)]
	for thread in threads:
		thread.start()
	time.sleep(2)
	stop.set()
	for thread in threads:
		thread.join()
	assert errors == []
	[pool] = connections.snapshot()
	assert pool["peak"] == 3 and pool["open"] <= 3 and pool["waits"] > 0, pool
	# A connection closed to make room for another site's is still counted by the server until it has read the
	# client's quit: at most one such per reading thread beside the three open. (A loaded machine may give the
	# watching thread few samples, so it proves the ceiling only.)
	assert peak[0] <= 3 + 8, f"the server saw {peak[0]} connections of the sites at once"


def test_a_read_waits_for_a_connection_and_is_not_an_outage(bench_on_own_server):
	server, bench = bench_on_own_server
	connections = Connections(connect, limit=1, wait_secs=patient(10))
	first, second = databases(bench, connections)[:2]
	pool = connections.pool(first.site)
	taken = pool.take(first.site)
	answered = []
	reader = threading.Thread(target=lambda: answered.append(second.query("SELECT 1 AS one")))
	reader.start()
	time.sleep(0.3)
	assert answered == [] and held(server) == 1, "the second site opened a connection beyond the bound"
	pool.give_back(first.site, taken)
	reader.join(patient(10))
	assert answered == [[{"one": 1}]]
	# The first site's idle connection made room for the second's (the server lists it until it has read the quit).
	deadline = time.monotonic() + patient(5)
	while held(server) > 1 and time.monotonic() < deadline:
		time.sleep(0.02)
	assert held(server) == 1 and connections.snapshot()[0]["open"] == 1


def test_a_wait_past_its_limit_says_busy_not_unreachable(bench_on_own_server):
	_, bench = bench_on_own_server
	connections = Connections(connect, limit=1, wait_secs=0.2)
	first, second = databases(bench, connections)[:2]
	pool = connections.pool(first.site)
	taken = pool.take(first.site)
	try:
		with pytest.raises(DatabaseBusy, match="db_max_connections"):
			second.query("SELECT 1")
	finally:
		pool.give_back(first.site, taken)
	assert second.query("SELECT 1 AS one") == [{"one": 1}]


def test_idle_connections_close(bench_on_own_server):
	server, bench = bench_on_own_server
	connections = Connections(connect, limit=4, idle_secs=3600)
	for db in databases(bench, connections)[:4]:
		db.query("SELECT 1")
	assert held(server) == 4
	assert connections.close_idle() == 0, "none has been idle long enough yet"
	[pool] = connections.pools.values()
	pool.idle_secs = 0.2
	time.sleep(0.3)
	assert connections.close_idle() == 4
	deadline = time.monotonic() + patient(5)
	while held(server) and time.monotonic() < deadline:
		time.sleep(0.02)
	assert held(server) == 0


def test_a_killed_connection_is_replaced_without_an_error(bench_on_own_server):
	server, bench = bench_on_own_server
	connections = Connections(connect, limit=2)
	[db] = databases(bench, connections)[:1]
	[row] = db.query("SELECT CONNECTION_ID() AS id")
	with server.connect() as conn, conn.cursor() as cur:
		cur.execute(f"KILL {int(row['id'])}")
	[again] = db.query("SELECT CONNECTION_ID() AS id")
	assert again["id"] != row["id"]
	assert connections.snapshot()[0]["open"] == 1, "the killed connection no longer counts"


def test_changed_credentials_never_reuse_the_old_login(bench_on_own_server):
	_, bench = bench_on_own_server
	connections = Connections(connect, limit=2)
	name = bench.site_names()[0]
	db = SiteDatabase(bench.site(name), connections)
	db.query("SELECT 1")  # its connection is now idle in the pool
	path = bench.path / "sites" / name / "site_config.json"
	config = json.loads(path.read_text())
	config["db_password"] = "not-the-password"
	path.write_text(json.dumps(config))
	wrong = SiteDatabase(bench.site(name), connections)
	with pytest.raises(DatabaseError, match="db_password"):
		wrong.query("SELECT 1")


def test_sites_on_two_servers_have_a_bound_each(mariadb, make_bench):
	one, two = mariadb(max_connections=20), mariadb(max_connections=20)
	benches = [make_bench("a.localhost", "b.localhost", "c.localhost", db_port=server.port) for server in (one, two)]
	connections = Connections(connect, limit=2)
	for bench in benches:
		for db in databases(bench, connections):
			db.query("SELECT 1")
	assert sorted(pool["open"] for pool in connections.snapshot()) == [2, 2]
	assert held(one) == 2 and held(two) == 2
