"""Redis refusing writes: out of memory, a read-only replica, a prepared job's hash gone.

The process never exits and logs each refusal once; nothing is lost: a fire that could not be
written is caught up by its schedule's catch-up policy once Redis takes writes again.
"""

from __future__ import annotations

import time

import pytest

from btu.scheduler_daemon.log import record_fields
from btu.shared import protocol
from tests.engine.helpers import cli, duplicates, gaps, queue_ids, queue_key, slots_by_schedule, wait_until
from tests.engine.test_failover import every_second_schedules
from tests.engine.test_prepare_release import (  # noqa: F401
	leader,
	next_instant,
	once_at,
	prepare_due,
	release,
	site,
	sleep_until_ms,
)
from tests.support.keys import KEYS
from tests.support.redis_server import RedisServer

pytestmark = pytest.mark.versions

FLAGS = ("--lease-ttl-secs", "1", "--full-refresh-interval-secs", "1")


@pytest.fixture
def server():
	server = RedisServer().start()
	yield server
	server.close()


def fill_to_maxmemory(client) -> int:
	"""Set maxmemory just above what is used and fill Redis until it refuses writes; returns the junk keys written."""
	client.config_set("maxmemory-policy", "noeviction")
	client.config_set("maxmemory", int(client.info("memory")["used_memory"]) + 256 * 1024)
	written = 0
	block = "x" * 16384
	while True:
		try:
			client.set(f"junk:{written}", block)
		except Exception as exc:  # redis-py 8 gives OutOfMemoryError with the OOM code taken off; each names maxmemory
			assert "maxmemory" in str(exc), exc
			break
		written += 1
	# The refused write's own 16 KB counted towards the limit: once it is freed, smaller writes fit again.
	# A limit below what is used refuses every write until the test frees the junk.
	client.config_set("maxmemory", int(client.info("memory")["used_memory"]) - 128 * 1024)
	return written


def test_out_of_memory_neither_kills_nor_loses(server, engine_bench, processes):
	bench, data = engine_bench(redis_url=server.url)
	client = server.client()
	key = queue_key(bench)
	names = every_second_schedules(data, 3)
	scheduler = processes.scheduler(bench.path, *FLAGS)
	wait_until(lambda: len(queue_ids(client, key)) >= 6, 30, "fires before the fill")
	junk = fill_to_maxmemory(client)
	time.sleep(5)
	assert scheduler.alive(), f"the scheduler exited at maxmemory\n{scheduler.tail()}"
	done = cli(bench.path, "status", "--json")
	assert done.returncode in (0, 1) and "Traceback" not in done.stderr, done.stderr
	client.delete(*[f"junk:{i}" for i in range(junk)])
	client.config_set("maxmemory", 0)
	freed_ms = time.time() * 1000
	wait_until(
		lambda: all(max(s) > freed_ms + 2000 for s in slots_by_schedule(queue_ids(client, key)).values()),
		30,
		"fires after",
	)
	assert scheduler.stop() == 0
	ids = queue_ids(client, key)
	assert duplicates(ids) == []
	slots = slots_by_schedule(ids)
	assert all(gaps(slots[name]) == [] for name in names), "fire_all caught up every slot refused meanwhile"
	log = scheduler.log()
	refusals = [line for line in log.splitlines() if " redis_refused " in line]
	assert refusals and all("maxmemory" in line for line in refusals), refusals
	assert len(refusals) <= 2, f"logged once per kind of refusal, not per attempt: {refusals}"
	assert "Traceback" not in log


def test_scheduler_on_a_read_only_replica_lives_and_harms_nothing(server, engine_bench, processes):
	replica = RedisServer().start()
	try:
		replica.client().replicaof("127.0.0.1", server.port)
		bench, data = engine_bench(redis_url=server.url)
		key = queue_key(bench)
		client = server.client()
		every_second_schedules(data, 2)
		on_master = processes.scheduler(bench.path, *FLAGS)
		on_replica = processes.scheduler(bench.path, *FLAGS, "--redis-url", replica.url)
		wait_until(lambda: len(queue_ids(client, key)) >= 10, 30, "fires by the scheduler on the master")
		time.sleep(3)
		assert on_replica.alive(), f"the scheduler on the replica exited\n{on_replica.tail()}"
		done = cli(bench.path, "status", "--json", "--redis-url", replica.url)
		assert done.returncode == 0 and "Traceback" not in done.stderr, done.stderr
		assert on_master.stop() == 0 and on_replica.stop() == 0
		ids = queue_ids(client, key)
		assert duplicates(ids) == []
		assert all(gaps(slots) == [] for slots in slots_by_schedule(ids).values())
		log = on_replica.log()
		refusals = [line for line in log.splitlines() if " redis_refused " in line]
		# redis-py gives READONLY as ReadOnlyError with the code taken off the message.
		assert refusals and all("READONLY" in line or "ReadOnly" in line for line in refusals), log[-2000:]
		assert len(refusals) <= 2 and "Traceback" not in log
	finally:
		replica.close()


def one_prepared_fire(site, r) -> tuple:  # noqa: F811
	"""A leader with one Once fire prepared 1-2 s ahead: (bench, scheduler, its moment, its prepared member, its job
	id)."""
	bench, data, task = site
	instant = next_instant()
	once_at(data, task, instant)
	scheduler = leader(bench)
	prepare_due(scheduler)
	[member] = r.zrange(KEYS.prepared, 0, -1)
	return bench, scheduler, instant, member, member.decode().split("\t")[0]


def test_prepared_fire_whose_job_hash_is_gone_is_quarantined_not_pushed(site, r):  # noqa: F811
	bench, scheduler, instant, member, job_id = one_prepared_fire(site, r)
	r.delete(f"rq:job:{job_id}")
	sleep_until_ms(instant * 1000)
	assert release(scheduler)
	assert queue_ids(r, queue_key(bench)) == [], "an id without its job would fail in the worker"
	assert not r.exists(f"rq:job:{job_id}"), "no half hash is left behind"
	assert r.zcard(KEYS.prepared) == 0
	[what] = [w.decode() for w in r.hkeys(KEYS.quarantine)]
	assert what.startswith(f"{KEYS.prepared} member ")


def test_a_queue_refusing_the_push_keeps_its_fire_prepared_until_it_takes_it(site, r, caplog):  # noqa: F811
	bench, scheduler, instant, member, job_id = one_prepared_fire(site, r)
	key = queue_key(bench)
	r.set(key, "not a list")  # RPUSH on it fails: WRONGTYPE
	sleep_until_ms(instant * 1000)
	with caplog.at_level("INFO", logger="btu.scheduler"):
		step = scheduler.firing.release()
	assert step.push_refused and not step.fenced
	assert r.zrange(KEYS.prepared, 0, -1) == [member], "a refused push keeps its fire prepared"
	assert r.hget(f"rq:job:{job_id}", "status") == b"scheduled", "not stamped queued while on no queue"
	[refused] = [record_fields(rec) for rec in caplog.records if rec.getMessage() == "fire_push_refused"]
	assert key in refused["reason"] and refused["effect"] == "kept prepared; tried again"
	r.delete(key)
	assert not scheduler.firing.release().push_refused
	assert queue_ids(r, key) == [job_id], "released once the queue takes it, within the misfire grace"
	assert r.zcard(KEYS.prepared) == 0
	assert release(scheduler) and queue_ids(r, key) == [job_id], "and only once"
