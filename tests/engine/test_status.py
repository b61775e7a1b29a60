"""`status.build`: each site's next fires come from the heads of the prepared and due sets,
read a page at a time, never the whole sets; the leader's `status.Publisher` reads the sites again only when
something changed."""

from __future__ import annotations

import json
import time

from btu.scheduler_daemon.leading import status
from btu.shared import protocol
from btu.shared.keys import due_member
from tests.engine.test_stagger import SITES, add_schedule, reconciler
from tests.support.keys import KEYS


def prepared_member(site: str, schedule: str, fire_ms: int) -> str:
	"""A prepared-set member in prepare.lua's layout (state.Prepared)."""
	return "\t".join(
		[
			f"{site}::btu|{schedule}|x",
			"rq:queue:default",
			KEYS.schedule_key(site, schedule),
			KEYS.counters_key(site),
			due_member(site, schedule),
			str(fire_ms),
			str(fire_ms),
			"0",
			str(fire_ms - 1000),
		]
	)


def add_schedules(r, site: str, fires: dict[str, float]) -> None:
	"""Schedules of `site` in the state's site set and due set: name -> fire ms."""
	r.sadd(KEYS.sites, site)
	r.sadd(KEYS.site_schedules_key(site), *fires)
	r.zadd(KEYS.due, {due_member(site, name): ms for name, ms in fires.items()})


def test_next_fires_per_site_from_the_heads_of_both_sets(r):
	now = int(time.time() * 1000)
	add_schedules(r, "a.localhost", {f"TS-{n:06d}": now + 60_000 + n for n in range(1500)})
	# b's schedules fire after all of a's but one, which is overdue; c has none.
	add_schedules(r, "b.localhost", {**{f"TS-{n:06d}": now + 90_000 + n for n in range(4)}, "TS-overdue": now - 5000})
	r.sadd(KEYS.sites, "c.localhost")
	r.sadd(KEYS.site_schedules_key("a.localhost"), "TS-900000")
	r.zadd(KEYS.prepared, {prepared_member("a.localhost", "TS-900000", now + 1000): now + 1000})

	r.config_resetstat()
	built = status.build(r, KEYS, next_n=10)
	pages = int(r.info("commandstats")["cmdstat_zrange"]["calls"])

	sites = built["sites"]
	assert [fire["schedule"] for fire in sites["a.localhost"]["next_fires"]] == ["TS-900000"] + [
		f"TS-{n:06d}" for n in range(9)
	]
	assert [fire["schedule"] for fire in sites["b.localhost"]["next_fires"]] == ["TS-overdue"] + [
		f"TS-{n:06d}" for n in range(4)
	]
	assert sites["b.localhost"]["oldest_overdue_ms"] >= 5000 and sites["a.localhost"]["oldest_overdue_ms"] is None
	assert sites["c.localhost"]["next_fires"] == [] and sites["c.localhost"]["schedules"] == 0
	# One page of the prepared set; due pages until b's last fire (entry 1,505), not STATUS_SCAN's worth.
	assert pages == 1 + -(-1505 // status.STATUS_PAGE)


def test_an_idle_status_reads_one_page_of_each_set(r):
	now = int(time.time() * 1000)
	add_schedules(r, "a.localhost", {f"TS-{n:06d}": now + 3_600_000 + n for n in range(10_000)})
	r.sadd(KEYS.sites, "empty.localhost")
	r.config_resetstat()
	built = status.build(r, KEYS, next_n=10)
	assert len(built["sites"]["a.localhost"]["next_fires"]) == 10
	assert int(r.info("commandstats")["cmdstat_zrange"]["calls"]) == 2  # the (empty) prepared set, then one page of due


def test_the_published_status_reads_the_sites_again_only_when_the_state_changed(make_bench, r, monkeypatch):
	bench = make_bench(*SITES[:2])
	first = add_schedule(bench, SITES[0])
	reconcile = reconciler(bench, r)
	reconcile.full()
	publisher = status.Publisher(KEYS)

	def published() -> dict:
		publisher.publish(r, reconcile.health(), reconcile.state.changes)
		return json.loads(r.get(KEYS.status))

	before = published()
	assert before["sites"][SITES[0]]["schedules"] == 1
	# Written behind the state's back (as another process would): the sites' part is not read again...
	r.sadd(KEYS.site_schedules_key(SITES[0]), "TS-elsewhere")
	time.sleep(0.002)
	unchanged = published()
	assert unchanged["sites"] == before["sites"] and unchanged["updated_at"] > before["updated_at"], (
		"the time moves, the sites are the last read"
	)
	# ...until this process's state changes,
	second = add_schedule(bench, SITES[0])
	reconcile.sync(SITES[0], [second])
	assert published()["sites"][SITES[0]]["schedules"] == 3
	# a site's health changes,
	reconcile.site_health.paused[SITES[1]] = "site_config: pause_scheduler"
	assert published()["sites"][SITES[1]]["paused_reason"] == "site_config: pause_scheduler"
	# or REBUILD_SECONDS pass.
	r.srem(KEYS.site_schedules_key(SITES[0]), "TS-elsewhere")
	assert published()["sites"][SITES[0]]["schedules"] == 3
	monkeypatch.setattr(status, "REBUILD_SECONDS", 0.0)
	assert published()["sites"][SITES[0]]["schedules"] == 2
	assert first and second
