"""The leader's acknowledgement that it fires a site's Frappe Scheduled Job Types (`Keys.frappe_jobs_ack_key`).

Frappe's tick stands back for a site's job types only while that key lives (tier 2:
btu_core/tests/test_frappe_jobs_ack.py), so the scheduler must write it exactly where it fires them: as the leader,
for a site switched on whose database answers and that is not held, with the frappe executor, and under the id of
its own bench. It is written with each
heartbeat (one round trip, however many sites), deleted when the site stops being fired or the leader steps down.
"""

from __future__ import annotations

import json

import pytest
import redis

from btu.scheduler_daemon.leading.engine import Scheduler
from btu.scheduler_daemon.operations.config import Config
from btu.scheduler_daemon.reads.bench import frappe_bench_id
from btu.shared import protocol
from btu.shared.keys import FRAPPE_JOBS_ACK_TTL_SECONDS
from btu.shared.redis_refusals import is_denied
from devbench.data import SiteData
from tests.engine.helpers import wait_for_leader, wait_until
from tests.engine.test_scheduled_jobs import frappe_leader, insert_job_type
from tests.support.keys import KEYS
from tests.support.ports import claim_port

pytestmark = pytest.mark.versions


def beat(scheduler: Scheduler) -> None:
	"""The scheduler's next heartbeat now, not HEARTBEAT_SECONDS after its last."""
	scheduler.next_heartbeat = 0.0
	scheduler.heartbeat()


def ack_key(bench, site: str) -> str:
	return KEYS.frappe_jobs_ack_key(bench.site(site).bench_id, site)


def acks(r) -> set[str]:
	return {key.decode() for key in r.scan_iter(match=f"{KEYS.frappe_jobs_ack_prefix}*")}


def edit_site_config(bench, site: str, **changes) -> None:
	path = bench.path / "sites" / site / "site_config.json"
	path.write_text(json.dumps({**json.loads(path.read_text()), **changes}, indent=1))


@pytest.fixture
def switched_on(engine_bench):
	"""Factory: a dev bench whose sites have Frappe's scheduler enabled, BTU firing their Scheduled Job Types, and
	one."""
	opened: list[SiteData] = []

	def make(*sites: str, **kwargs):
		bench, data = engine_bench(*sites, **kwargs)
		others = [SiteData(bench, name) for name in bench.site_names() if name != data.site.name]
		opened.extend(others)
		for site_data in (data, *others):
			site_data.set_single("System Settings", "time_zone", "UTC")
			site_data.set_single("System Settings", "enable_scheduler", 1)
			site_data.set_single("BTU Configuration", "fire_frappe_jobs", 1)
			insert_job_type(site_data, "every_minute", cron_format="* * * * *")
		return bench, data

	yield make
	for site_data in opened:
		site_data.close()


def test_the_leader_acknowledges_each_site_it_fires_in_one_round_trip_and_a_standby_none(switched_on, r):
	bench, data = switched_on("a.localhost", "b.localhost")
	leader = frappe_leader(bench)
	standby = Scheduler(Config(bench=str(bench.path), executor="frappe"), bench.path)
	standby.reconciler.full()  # what it would fire if it led
	beat(standby)
	assert acks(r) == set()

	r.config_resetstat()
	beat(leader)
	assert acks(r) == {ack_key(bench, "a.localhost"), ack_key(bench, "b.localhost")}
	assert int(r.info("commandstats")["cmdstat_set"]["calls"]) == 3  # the heartbeat and both acks, pipelined
	key = ack_key(bench, "a.localhost")
	assert r.get(key).decode() == leader.lease.value  # the lease token: who acknowledged, in which term
	assert 0 < r.ttl(key) <= leader.acks.ttl_secs
	# Refreshed with every heartbeat: it never lapses while the leader lives.
	r.expire(key, 2)
	beat(leader)
	assert r.ttl(key) > 2


def test_the_ack_names_the_bench_so_a_same_named_site_of_another_bench_is_not_acknowledged(
	switched_on, engine_bench, r
):
	bench, _ = switched_on("shop.localhost")
	other, _ = engine_bench("shop.localhost")
	beat(frappe_leader(bench))
	assert bench.site("shop.localhost").bench_id != other.site("shop.localhost").bench_id
	assert acks(r) == {KEYS.frappe_jobs_ack_key(bench.site("shop.localhost").bench_id, "shop.localhost")}


@pytest.mark.parametrize("change", ["fire_frappe_jobs off", "BTU disabled", "pause_scheduler", "database unreachable"])
def test_a_site_no_longer_fired_loses_its_ack_at_the_next_heartbeat(switched_on, r, change):
	bench, data = switched_on("a.localhost", "b.localhost")
	leader = frappe_leader(bench)
	beat(leader)
	assert ack_key(bench, "a.localhost") in acks(r)
	if change == "fire_frappe_jobs off":
		data.set_single("BTU Configuration", "fire_frappe_jobs", 0)
	elif change == "BTU disabled":
		data.set_single("BTU Configuration", "enabled", 0)
	elif change == "pause_scheduler":
		edit_site_config(bench, "a.localhost", pause_scheduler=1)
	else:
		edit_site_config(bench, "a.localhost", db_host="127.0.0.1", db_port=claim_port())
	leader.reconciler.full()
	beat(leader)
	assert acks(r) == {ack_key(bench, "b.localhost")}


def test_switched_off_over_rpc_the_ack_goes_at_once_and_comes_back_only_with_a_full_reconcile(switched_on, r):
	bench, data = switched_on()
	site = data.site.name
	leader = frappe_leader(bench)
	beat(leader)
	assert acks(r) == {ack_key(bench, site)}
	data.set_single("BTU Configuration", "fire_frappe_jobs", 0)
	leader.reconciler.sync(site, ["frappe-job:every_minute"])  # BTU Configuration's on_update announces each
	beat(leader)
	assert acks(r) == set()
	# Switched on again: an RPC may name one schedule only, so the site is acknowledged once a full reconcile
	# has put all its job types in the state (meanwhile both fire, and the slot claims keep one run).
	data.set_single("BTU Configuration", "fire_frappe_jobs", 1)
	leader.reconciler.sync(site, ["frappe-job:every_minute"])
	beat(leader)
	assert acks(r) == set()
	leader.reconciler.full()
	beat(leader)
	assert acks(r) == {ack_key(bench, site)}


def test_the_rq_executor_and_frappes_scheduler_disabled_acknowledge_nothing(switched_on, r):
	bench, data = switched_on()
	rq_leader = Scheduler(Config(bench=str(bench.path), executor="rq", lease_ttl_secs=60.0), bench.path)
	assert rq_leader.lease.acquire()
	rq_leader.reconciler.full()
	beat(rq_leader)
	assert acks(r) == set()
	rq_leader.step_down("test")
	data.set_single("System Settings", "enable_scheduler", 0)
	beat(frappe_leader(bench))
	assert acks(r) == set()


def test_a_leader_that_steps_down_deletes_its_acks_and_one_fenced_leaves_them_to_the_new_leader(switched_on, r):
	bench, data = switched_on()
	leader = frappe_leader(bench)
	beat(leader)
	key = ack_key(bench, data.site.name)
	leader.step_down("stopped")
	assert acks(r) == set()
	# A leader fenced off (another took the lease) shares the keys with the new leader: it deletes none.
	first = frappe_leader(bench)
	beat(first)
	r.delete(KEYS.leader)
	second = frappe_leader(bench)
	beat(second)
	first.fenced()  # what the engine does when a fire script finds the lease another's
	beat(first)
	assert acks(r) == {key} and r.get(key).decode() == second.lease.value


def test_a_running_scheduler_acknowledges_at_once_and_its_stop_hands_the_site_back_at_once(switched_on, processes, r):
	"""The process as it runs: elected, it reconciles and acknowledges; SIGTERM steps it down and deletes the key."""
	bench, data = switched_on()
	scheduler = processes.scheduler(bench.path, executor="frappe")
	assert wait_for_leader(r, processes) is scheduler
	key = ack_key(bench, data.site.name)
	wait_until(lambda: r.exists(key), 20, f"the leader's acknowledgement\n{processes.logs()}")
	assert 0 < r.ttl(key) <= FRAPPE_JOBS_ACK_TTL_SECONDS
	assert scheduler.stop() == 0
	assert acks(r) == set()


def test_an_acknowledging_leader_cut_off_from_redis_leaves_its_acks_to_expire(switched_on, r):
	bench, data = switched_on()
	leader = frappe_leader(bench)
	beat(leader)
	leader.lease.valid_until = 0.0  # its lease ran out while Redis did not answer: it may be another's now
	beat(leader)
	leader.step_down("stopped")
	assert acks(r) == {ack_key(bench, data.site.name)}


def test_a_redis_refusal_of_an_ack_write_fails_the_heartbeat_like_any_other(switched_on, r, redis_url):
	"""A leader whose user may not write the acks is reported through the main loop's refusal path, not ignored."""
	bench, _ = switched_on()
	leader = frappe_leader(bench)
	r.set(ack_key(bench, bench.site_names()[0]), "x")
	r.execute_command("ACL", "SETUSER", "btu-ack-test", "on", ">pw", "~btu:scheduler:*", "~btu:due", "+@all")
	try:
		leader.redis = redis.Redis.from_url(redis_url, username="btu-ack-test", password="pw")
		with pytest.raises(redis.RedisError) as raised:
			beat(leader)
		assert is_denied(raised.value)
	finally:
		r.execute_command("ACL", "DELUSER", "btu-ack-test")


@pytest.mark.parametrize(
	"common, own, expected",
	[
		({}, {}, None),  # the real bench path, / as -
		({"bench_id": "prod"}, {}, "prod"),
		({"bench_id": "prod"}, {"bench_id": "site-own"}, "site-own"),  # Frappe's conf: site_config.json over common
		({"bench_id": ""}, {}, ""),  # present though empty, as Frappe's conf.get("bench_id", default) keeps it
	],
)
def test_the_bench_id_is_the_one_frappe_computes_in_the_site(tmp_path, monkeypatch, common, own, expected):
	monkeypatch.delenv("FRAPPE_BENCH_ROOT", raising=False)
	path = tmp_path / "bench"
	assert frappe_bench_id({**common, **own}, path) == (
		str(path.resolve()).strip("/").replace("/", "-") if expected is None else expected
	)
	monkeypatch.setenv("FRAPPE_BENCH_ROOT", "/srv/bench")
	assert frappe_bench_id({}, path) == "srv-bench"
