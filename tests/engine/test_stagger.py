"""The staggered reconcile: each site read once per full_refresh_interval_secs, a slice a tick, never all at once."""

from __future__ import annotations

from datetime import datetime, timezone

from btu.scheduler_daemon.operations.config import Config
from btu.scheduler_daemon.reconcile.cycles import MIN_TICK_SECS, Cycle
from btu.scheduler_daemon.reconcile.reconciler import Reconciler
from btu.scheduler_daemon.store.state import State
from btu.shared import protocol
from devbench.bench import create_dev_bench
from devbench.data import SiteData
from tests.support.keys import KEYS

SITES = tuple(f"s{i}.localhost" for i in range(1, 7))


def test_a_cycle_reads_every_site_once_in_slices_a_tick_apart():
	cycle = Cycle([f"site{i}" for i in range(1000)])
	slices = []
	while cycle.rotation:
		names, tick = cycle.next_slice(60)
		slices.append(names)
	assert tick == MIN_TICK_SECS and len(slices) * tick <= 60 and max(map(len, slices)) == 84, (
		"1,000 sites over a minute: 84 every 5 s"
	)
	assert sorted(name for names in slices for name in names) == sorted(cycle.sites)


def test_an_interval_shorter_than_a_tick_reads_every_site_each_interval():
	cycle = Cycle([f"s{i}.localhost" for i in range(6)])
	assert cycle.next_slice(1) == ([f"s{i}.localhost" for i in range(6)], 1), (
		"full_refresh_interval_secs 1: the whole bench each second"
	)


def test_a_small_bench_reads_one_site_a_tick():
	cycle = Cycle(["a.localhost", "b.localhost"])
	assert cycle.next_slice(60) == (["a.localhost"], 30.0)
	assert cycle.next_slice(60) == (["b.localhost"], 30.0) and cycle.rotation == []


def test_a_thousand_sites_at_the_default_pace_are_read_four_a_tick():
	cycle = Cycle([f"site{i}" for i in range(1000)])
	names, tick = cycle.next_slice(Config().refresh_interval(len(cycle.sites)))
	assert (len(names), tick) == (17, MIN_TICK_SECS), (
		"each of 1,000 sites read every 5 minutes by default: 17 every 5 s, not 84"
	)


def reconciler(bench, r) -> Reconciler:
	return Reconciler(bench.path, State(r, KEYS), "frappe", lambda: datetime.now(timezone.utc), lambda: None)


def add_schedule(bench, site: str) -> str:
	with SiteData(bench, site) as data:
		task = data.insert_task(function_string="btu_demo.demo_tasks.say_hello", desc_short="x")
		return data.insert_schedule(task, run_frequency="Cron Style", cron_string="0 3 * * *")


def test_an_edit_by_sql_is_found_when_its_sites_slice_comes(make_bench, r):
	bench = make_bench(*SITES)
	reconcile = reconciler(bench, r)
	reconcile.full()
	name = add_schedule(bench, SITES[-1])  # written as SQL would, with no RPC: only a reconcile finds it
	for _ in SITES[:-1]:
		assert reconcile.stagger(len(SITES) * MIN_TICK_SECS) == MIN_TICK_SECS
		assert not r.sismember(KEYS.site_schedules_key(SITES[-1]), name), "read before its slice: not staggered"
	reconcile.stagger(len(SITES) * MIN_TICK_SECS)
	assert r.sismember(KEYS.site_schedules_key(SITES[-1]), name)


def test_a_site_made_during_a_cycle_keeps_the_state_an_rpc_gave_it(make_bench, r, db_settings):
	bench = make_bench(*SITES[:2])
	reconcile = reconciler(bench, r)
	reconcile.full()
	reconcile.stagger(60)  # a cycle begins: the bench's two sites are listed
	create_dev_bench(bench.path, (*SITES[:2], "new.localhost"), **db_settings)
	name = add_schedule(bench, "new.localhost")
	reconcile.compiler.bench = bench.load(bench.path)
	reconcile.sync("new.localhost", [name])  # the after-commit RPC
	reconcile.stagger(60)  # the cycle ends
	assert r.sismember(KEYS.site_schedules_key("new.localhost"), name), "dropped as no longer a BTU site"
	assert b"new.localhost" in r.smembers(KEYS.sites)
