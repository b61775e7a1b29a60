"""Frappe's Sentinel keys as the scheduler and its CLI read them, against real sentinels with passwords.

Same keys and precedence as `frappe.utils.redis_queue.RedisQueue.get_connection`:
the sentinels' password for the sentinels, the master's (else the bench's queue
credentials, `use_rq_auth`) for the master; `redis_queue` is not used; BTU's own
`redis_url` wins over both.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import redis

from btu.scheduler_daemon.reads.bench import Bench
from tests.engine.helpers import cli
from tests.support.sentinel import SentinelTopology

pytestmark = pytest.mark.versions

MASTER_PASSWORD = "m-secret"
SENTINEL_PASSWORD = "s-secret"


@pytest.fixture(scope="module")
def topology():
	started = SentinelTopology(master_password=MASTER_PASSWORD, sentinel_password=SENTINEL_PASSWORD).start()
	yield started
	started.close()


def bench_with(make_bench, topology, **keys) -> Bench:
	bench = make_bench(redis_url="redis://127.0.0.1:1/0")  # a redis_queue nothing answers on: it must not be used
	common = Path(bench.path) / "sites" / "common_site_config.json"
	config = {**json.loads(common.read_text()), **topology.common_config(), **keys}
	config["redis_queue"] = "redis://127.0.0.1:1/0"
	common.write_text(json.dumps(config, indent=1))
	return Bench.load(bench.path)


def master_port(client) -> int:
	client.ping()
	return client.connection_pool.master_address[1]


def test_sentinel_and_master_passwords_reach_the_master_not_redis_queue(make_bench, topology):
	bench = bench_with(
		make_bench,
		topology,
		redis_queue_sentinel_password=SENTINEL_PASSWORD,
		redis_queue_master_password=MASTER_PASSWORD,
	)
	assert master_port(bench.redis()) == topology.master()[1]
	assert (
		bench.sentinel.describe()
		== f"sentinel service 'btutest' via {', '.join(f'127.0.0.1:{p}' for p in topology.sentinel_ports)}"
	)


def test_the_master_password_defaults_to_the_bench_queue_credentials(make_bench, topology):
	bench = bench_with(
		make_bench,
		topology,
		redis_queue_sentinel_password=SENTINEL_PASSWORD,
		use_rq_auth=1,
		rq_username="default",
		rq_password=MASTER_PASSWORD,
	)
	assert master_port(bench.redis()) == topology.master()[1]


@pytest.mark.parametrize(
	"keys",
	[
		{"redis_queue_sentinel_password": "wrong", "redis_queue_master_password": MASTER_PASSWORD},
		{"redis_queue_sentinel_password": SENTINEL_PASSWORD, "redis_queue_master_password": "wrong"},
		{"redis_queue_sentinel_password": SENTINEL_PASSWORD},
	],
	ids=["wrong-sentinel-password", "wrong-master-password", "no-master-password"],
)
def test_a_wrong_password_is_refused_not_routed_elsewhere(make_bench, topology, keys):
	with pytest.raises(redis.RedisError):
		bench_with(make_bench, topology, **keys).redis(socket_timeout=2, socket_connect_timeout=2).ping()


def test_btu_redis_url_wins_over_sentinel(make_bench, topology):
	bench = bench_with(
		make_bench,
		topology,
		redis_queue_sentinel_password=SENTINEL_PASSWORD,
		redis_queue_master_password=MASTER_PASSWORD,
	)
	url = f"redis://:{MASTER_PASSWORD}@127.0.0.1:{topology.ports['b']}/0"
	client = bench.redis(url)
	assert client.connection_pool.connection_kwargs["port"] == topology.ports["b"]
	client.ping()


def test_status_says_which_master_it_read(make_bench, topology):
	bench = bench_with(
		make_bench,
		topology,
		redis_queue_sentinel_password=SENTINEL_PASSWORD,
		redis_queue_master_password=MASTER_PASSWORD,
	)
	result = cli(bench.path, "status", "--json")
	assert f"127.0.0.1:{topology.master()[1]}/0 (sentinel service btutest)" == json.loads(result.stdout)["redis"], (
		result.stderr
	)
	assert (
		SENTINEL_PASSWORD not in result.stdout + result.stderr and MASTER_PASSWORD not in result.stdout + result.stderr
	)
