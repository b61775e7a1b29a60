"""Benches sharing one Redis server: each fires all and only its own schedules with `btu_namespace`, and without
it the sharing is reported, never left silent.

Both benches have a site of the same name (frappe_docker's benches all call theirs `frontend`) whose schedules
have the same names (TS-000001...), so any key or job id the two shared would show as a collision.
"""

from __future__ import annotations

import json
import signal

import pytest
import redis

from btu.scheduler_daemon.operations import redis_acl
from btu.scheduler_daemon.store import jobs
from btu.shared import protocol
from btu.shared.keys import NAMESPACE_SETTING, Keys
from devbench.data import SiteData
from tests.engine.helpers import cli, duplicates, gaps, queue_ids, queue_key, wait_until
from tests.engine.test_failover import every_second_schedules
from tests.support.keys import KEYS

pytestmark = pytest.mark.versions

SITE = "frontend.localhost"
FLAGS = ("--lease-ttl-secs", "1", "--full-refresh-interval-secs", "1")


def set_namespace(bench, namespace: str | None) -> None:
	path = bench.sites_path / "common_site_config.json"
	config = json.loads(path.read_text())
	config.pop(NAMESPACE_SETTING, None)
	if namespace:
		config[NAMESPACE_SETTING] = namespace
	path.write_text(json.dumps(config, indent=1))


def bench_with_schedules(engine_bench, namespace: str | None, count: int = 2):
	bench, _ = engine_bench(SITE, "other.localhost")
	set_namespace(bench, namespace)
	with SiteData(bench, SITE) as data:
		names = every_second_schedules(data, count)
	return bench, names


def own_slots(r, bench, namespace: str) -> dict[str, list[int]]:
	"""Schedule -> slots fired on the bench's queue, each id read as the bench's (a job id of another namespace is
	refused)."""
	slots: dict[str, list[int]] = {}
	for job_id in queue_ids(r, queue_key(bench)):
		site, schedule, slot = jobs.parse_job_id(job_id, namespace)
		assert site == SITE
		slots.setdefault(schedule, []).append(round(slot.timestamp() * 1000))
	return slots


@pytest.mark.slow
def test_two_benches_each_fire_all_and_only_their_own_through_leader_kills(engine_bench, processes, r):
	benches = {
		"bench-a": bench_with_schedules(engine_bench, "bench-a"),
		"bench-b": bench_with_schedules(engine_bench, "bench-b"),
	}
	running = {ns: processes.scheduler(bench.path, *FLAGS) for ns, (bench, _) in benches.items()}

	def fired(ns: str, at_least: int) -> bool:
		bench, names = benches[ns]
		return len(queue_ids(r, queue_key(bench))) >= at_least * len(names)

	wait_until(lambda: all(fired(ns, 3) for ns in benches), 30, "both benches firing")
	for ns, (bench, _) in benches.items():  # each leader killed and a new one started on the bench's own state
		before = len(queue_ids(r, queue_key(bench)))
		running[ns].signal(signal.SIGKILL)
		running[ns].process.wait()
		running[ns] = processes.scheduler(bench.path, *FLAGS)
		wait_until(
			lambda: len(queue_ids(r, queue_key(bench))) >= before + 3 * len(benches[ns][1]),
			30,
			f"{ns} firing after its restart",
		)
	for ns in benches:
		assert running[ns].stop() == 0
	for ns, (bench, names) in benches.items():
		ids = queue_ids(r, queue_key(bench))
		assert duplicates(ids) == [], f"{ns}: a slot enqueued twice"
		slots = own_slots(r, bench, ns)
		assert sorted(slots) == sorted(names), f"{ns} fired another bench's schedules, or not all of its own"
		for name in names:
			assert gaps(slots[name]) == [], f"{ns} {name}: slots missing across the leader kill"
		assert r.scard(Keys(ns).site_schedules_key(SITE)) == len(names), (
			f"{ns}: its site's state holds another bench's schedules"
		)
	assert not r.exists(KEYS.leader) and not r.exists(KEYS.site_schedules_key(SITE)), "a seed-000 key was written"


@pytest.mark.slow
def test_a_redis_shared_without_namespaces_is_reported_and_the_report_ends_with_them(engine_bench, processes, r):
	(one, _), (two, _) = bench_with_schedules(engine_bench, None, 1), bench_with_schedules(engine_bench, None, 1)
	first, second = processes.scheduler(one.path, *FLAGS), processes.scheduler(two.path, *FLAGS)

	def reported(bench) -> list[dict]:
		done = cli(bench.path, "status", "--json")
		return json.loads(done.stdout).get("shared_redis") or []

	shared = wait_until(lambda: reported(one), 60, "status reporting the shared Redis")
	assert sorted(b["path"] for b in shared) == sorted([str(one.path), str(two.path)])
	wait_until(
		lambda: " redis_shared " in first.log() and " redis_shared " in second.log(),
		60,
		"each scheduler logging the sharing",
	)
	assert first.log().count(" redis_shared ") == 1, "logged once, not at every check"

	assert second.stop() == 0
	set_namespace(two, "bench-two")
	second = processes.scheduler(two.path, *FLAGS)
	wait_until(lambda: " redis_shared_ended " in first.log(), 60, "the first bench seeing the sharing end")
	assert reported(one) == [] and reported(two) == []
	assert first.stop() == 0 and second.stop() == 0


def test_a_benchs_acl_grant_reaches_only_its_own_keys(redis_server, r):
	rules = redis_acl.rules(Keys("bench-a"), "bench-a-id")
	own = Keys("bench-a").schedule_key(SITE, "TS-000001")
	neighbour = Keys("bench-b").schedule_key(SITE, "TS-000001")
	seed = KEYS.schedule_key(SITE, "TS-000001")
	r.execute_command("ACL", "SETUSER", "bench-a-user", "on", ">secret", "resetkeys", *rules)
	try:
		user = redis.Redis(host="127.0.0.1", port=redis_server.port, username="bench-a-user", password="secret")
		user.hset(own, "cursor", "1")
		for other in (neighbour, seed):
			with pytest.raises(redis.ResponseError, match="NOPERM|permission"):
				user.hset(other, "cursor", "1")
		user.close()
	finally:
		r.execute_command("ACL", "DELUSER", "bench-a-user")
