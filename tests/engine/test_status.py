"""`status.build`: each site's next fires come from the heads of the prepared and due sets,
read a page at a time, never the whole sets."""

from __future__ import annotations

import time

from btu.shared import protocol
from btu.scheduler_daemon import status


def prepared_member(site: str, schedule: str, fire_ms: int) -> str:
	"""A prepared-set member in prepare.lua's layout (state.Prepared)."""
	return "\t".join([
		f"{site}::btu|{schedule}|x", "rq:queue:default", protocol.schedule_key(site, schedule), protocol.counters_key(site),
		protocol.due_member(site, schedule), str(fire_ms), str(fire_ms), "0", str(fire_ms - 1000),
	])


def add_schedules(r, site: str, fires: dict[str, float]) -> None:
	"""Schedules of `site` in the state's site set and due set: name -> fire ms."""
	r.sadd(protocol.SITES_KEY, site)
	r.sadd(protocol.site_schedules_key(site), *fires)
	r.zadd(protocol.DUE_KEY, {protocol.due_member(site, name): ms for name, ms in fires.items()})


def test_next_fires_per_site_from_the_heads_of_both_sets(r):
	now = int(time.time() * 1000)
	add_schedules(r, "a.localhost", {f"TS-{n:06d}": now + 60_000 + n for n in range(1500)})
	# b's schedules fire after all of a's but one, which is overdue; c has none.
	add_schedules(r, "b.localhost", {**{f"TS-{n:06d}": now + 90_000 + n for n in range(4)}, "TS-overdue": now - 5000})
	r.sadd(protocol.SITES_KEY, "c.localhost")
	r.sadd(protocol.site_schedules_key("a.localhost"), "TS-900000")
	r.zadd(protocol.PREPARED_KEY, {prepared_member("a.localhost", "TS-900000", now + 1000): now + 1000})

	r.config_resetstat()
	built = status.build(r, next_n=10)
	pages = int(r.info("commandstats")["cmdstat_zrange"]["calls"])

	sites = built["sites"]
	assert [fire["schedule"] for fire in sites["a.localhost"]["next_fires"]] == ["TS-900000"] + [f"TS-{n:06d}" for n in range(9)]
	assert [fire["schedule"] for fire in sites["b.localhost"]["next_fires"]] == ["TS-overdue"] + [f"TS-{n:06d}" for n in range(4)]
	assert sites["b.localhost"]["oldest_overdue_ms"] >= 5000 and sites["a.localhost"]["oldest_overdue_ms"] is None
	assert sites["c.localhost"]["next_fires"] == [] and sites["c.localhost"]["schedules"] == 0
	# One page of the prepared set; due pages until b's last fire (entry 1,505), not STATUS_SCAN's worth.
	assert pages == 1 + -(-1505 // status.STATUS_PAGE)


def test_an_idle_status_reads_one_page_of_each_set(r):
	now = int(time.time() * 1000)
	add_schedules(r, "a.localhost", {f"TS-{n:06d}": now + 3_600_000 + n for n in range(10_000)})
	r.sadd(protocol.SITES_KEY, "empty.localhost")
	r.config_resetstat()
	built = status.build(r, next_n=10)
	assert len(built["sites"]["a.localhost"]["next_fires"]) == 10
	assert int(r.info("commandstats")["cmdstat_zrange"]["calls"]) == 2  # the (empty) prepared set, then one page of due
