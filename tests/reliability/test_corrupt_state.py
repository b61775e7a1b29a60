"""Wrong values in BTU's own Redis state: every kind of key and member, corrupted under a running scheduler.

Each case runs a real scheduler on a bench of two sites (two healthy schedules each, every second,
fire_all, and one victim schedule on the first site), corrupts one kind of key or member, then kills
the scheduler, corrupts the same again and starts another on the faulty state. It asserts that the
processes never exit, that healthy schedules on both sites have no gap and no duplicate, that the
victim fires again, that `btu-scheduler status --json` works throughout, and that what was moved
aside is listed there.
"""

from __future__ import annotations

import json
import signal
import time
from dataclasses import dataclass, field
from typing import Callable

import pytest

from btu import protocol
from tests.engine.helpers import ONE_SECOND, cli, duplicates, gaps, slots_by_schedule, wait_until
from tests.reliability.helpers import site_job_ids

SITES = ("site1.localhost", "site2.localhost")
FLAGS = ("--lease-ttl-secs", "1", "--full-refresh-interval-secs", "1")


@dataclass
class Case:
	inject: Callable  # (r, victim_key, victim_member) -> None
	quarantined: Callable[[str, str], str] | None = None  # (victim_key, site) -> what status lists as moved aside
	gap_ok: bool = False  # the corruption deletes prepared fires (their slots are lost)
	victim_fires: bool = True


def now_ms(r) -> int:
	seconds, micros = r.time()
	return seconds * 1000 + micros // 1000


def replace(r, key: str, value=("set", "junk")) -> None:
	"""Put a value of another type at `key`."""
	r.delete(key)
	command, *args = value
	getattr(r, command)(key, *args)


S1 = SITES[0]
CASES = {
	"schedule state is a string": Case(lambda r, k, m: replace(r, k), lambda k, s: k),
	"cursor is text": Case(lambda r, k, m: r.hset(k, "cursor", "abc"), lambda k, s: k),
	"cursor out of range": Case(lambda r, k, m: r.hset(k, "cursor", "9" * 25), lambda k, s: k),
	"fire_at is text": Case(lambda r, k, m: r.hset(k, "fire_at", "soon")),
	"runs is text": Case(lambda r, k, m: r.hset(k, "runs", "many"), lambda k, s: k),
	"spec is not JSON": Case(lambda r, k, m: r.hset(k, "spec", "{not json"), lambda k, s: k),
	"job is not a template": Case(lambda r, k, m: r.hset(k, "job", json.dumps({"queue": 1})), lambda k, s: k),
	"due entry far in the future": Case(lambda r, k, m: r.zadd(protocol.DUE_KEY, {m: 10**15})),
	"due entry gone": Case(lambda r, k, m: r.zrem(protocol.DUE_KEY, m)),
	"counter holds text": Case(
		lambda r, k, m: r.hset(protocol.counters_key(S1), "enqueued", "lots"), lambda k, s: f"{protocol.counters_key(S1)} enqueued",
	),
	"counters are a string": Case(lambda r, k, m: replace(r, protocol.counters_key(S1)), lambda k, s: protocol.counters_key(S1)),
	"junk prepared member due now": Case(
		lambda r, k, m: r.zadd(protocol.PREPARED_KEY, {"junk": now_ms(r)}), lambda k, s: f"{protocol.PREPARED_KEY} member",
	),
	"junk prepared member far ahead": Case(
		lambda r, k, m: r.zadd(protocol.PREPARED_KEY, {"a\tb\tc": now_ms(r) + 10**9}), lambda k, s: f"{protocol.PREPARED_KEY} member",
	),
	"forged prepared member naming another schedule's keys": Case(
		lambda r, k, m: r.zadd(protocol.PREPARED_KEY, {
			"\t".join(["forged", "rq:queue:x", protocol.schedule_key(SITES[1], "TS-000001"), protocol.counters_key(S1), m, "1", "1", "0", "1"]): now_ms(r),
		}),
		lambda k, s: f"{protocol.PREPARED_KEY} member",
	),
	"due set is a string": Case(lambda r, k, m: replace(r, protocol.DUE_KEY), lambda k, s: protocol.DUE_KEY),
	"prepared set is a hash": Case(lambda r, k, m: replace(r, protocol.PREPARED_KEY, ("hset", "a", "b")), lambda k, s: protocol.PREPARED_KEY, gap_ok=True),
	"prepared index is a string": Case(lambda r, k, m: replace(r, protocol.prepared_index_key(*protocol.parse_due_member(m)))),
	"site's schedule set is a string": Case(lambda r, k, m: replace(r, protocol.site_schedules_key(S1)), lambda k, s: protocol.site_schedules_key(S1)),
	"recent fires are a hash": Case(lambda r, k, m: replace(r, protocol.recent_fires_key(S1), ("hset", "a", "b")), lambda k, s: protocol.recent_fires_key(S1)),
	"invalid rows are a list": Case(lambda r, k, m: replace(r, protocol.invalid_rows_key(S1), ("rpush", "a")), lambda k, s: protocol.invalid_rows_key(S1)),
	"sites set is a string": Case(lambda r, k, m: replace(r, protocol.SITES_KEY), lambda k, s: protocol.SITES_KEY),
	"lease is junk without expiry": Case(lambda r, k, m: r.set(protocol.LEADER_KEY, "junk"), lambda k, s: protocol.LEADER_KEY),
	"lease is a hash": Case(lambda r, k, m: replace(r, protocol.LEADER_KEY, ("hset", "a", "b")), lambda k, s: protocol.LEADER_KEY),
	"lease lives for a year": Case(lambda r, k, m: r.set(protocol.LEADER_KEY, "999|nobody:1:x", px=365 * 86400 * 1000), lambda k, s: protocol.LEADER_KEY),
	"epoch is text": Case(lambda r, k, m: r.set(protocol.LEADER_EPOCH_KEY, "abc"), lambda k, s: protocol.LEADER_EPOCH_KEY),
	"generation is a hash": Case(lambda r, k, m: replace(r, protocol.GENERATION_KEY, ("hset", "a", "b")), lambda k, s: protocol.GENERATION_KEY),
	"processes are a string": Case(lambda r, k, m: replace(r, protocol.PROCESSES_KEY)),
	"command list is a string": Case(lambda r, k, m: replace(r, protocol.COMMANDS_KEY), lambda k, s: protocol.COMMANDS_KEY),
	"quarantine record is a string": Case(
		lambda r, k, m: (replace(r, protocol.QUARANTINE_KEY), r.hset(k, "cursor", "abc")), lambda k, s: k,
	),
	"resync set is a string": Case(lambda r, k, m: (replace(r, protocol.RESYNC_KEY), r.hset(k, "cursor", "abc")), lambda k, s: k),
}


def fires(r, bench, site: str) -> dict[str, list[int]]:
	return slots_by_schedule(site_job_ids(r, bench, site))


def status(bench) -> dict:
	"""`btu-scheduler status --json`, which must work on any state (exit 1 only means no leader)."""
	done = cli(bench.path, "status", "--json")
	assert done.returncode in (0, 1), f"status failed ({done.returncode}):\n{done.stderr}"
	assert "Traceback" not in done.stderr, done.stderr
	return json.loads(done.stdout)


@pytest.mark.parametrize("name", list(CASES), ids=lambda name: name.replace(" ", "_").replace("'", ""))
def test_wrong_value_costs_no_fire(name, engine_bench, processes, r):
	case = CASES[name]
	bench, data = engine_bench(*SITES)
	task = data.insert_task(function_string="tests.engine.tasks.record", arguments={"key": "test:runs"}, desc_short="record")
	schedule = dict(run_frequency="Cron Style", cron_string=ONE_SECOND, catch_up_policy="fire_all", catch_up_max=100)
	healthy = {S1: [data.insert_schedule(task, **schedule) for _ in range(2)]}
	victim = data.insert_schedule(task, **schedule)
	from btu.scheduler_daemon.devbench_data import SiteData

	with SiteData(bench, SITES[1]) as other:
		other_task = other.insert_task(function_string="tests.engine.tasks.record", arguments={"key": "test:runs"}, desc_short="record")
		healthy[SITES[1]] = [other.insert_schedule(other_task, **schedule) for _ in range(2)]
	victim_key, victim_member = protocol.schedule_key(S1, victim), protocol.due_member(S1, victim)

	first = processes.scheduler(bench.path, *FLAGS)
	wait_until(lambda: all(len(fires(r, bench, site).get(n, [])) >= 2 for site, names in healthy.items() for n in names), 30, "healthy fires")
	case.inject(r, victim_key, victim_member)
	injected_ms = now_ms(r)
	time.sleep(3)
	assert first.alive(), f"the scheduler exited on: {name}\n{first.tail()}"
	status(bench)

	# A scheduler started on the faulty state works too.
	first.signal(signal.SIGKILL)
	first.process.wait()
	case.inject(r, victim_key, victim_member)
	second = processes.scheduler(bench.path, *FLAGS)
	restarted_ms = now_ms(r)
	wait_until(
		lambda: all(max(fires(r, bench, site).get(n, [0])) > restarted_ms + 3000 for site, names in healthy.items() for n in names),
		40, "healthy fires after the restart",
	)
	if case.victim_fires:
		wait_until(lambda: max(fires(r, bench, S1).get(victim, [0])) > restarted_ms + 3000, 30, "the victim fires again")
	assert second.alive(), f"the second scheduler exited on: {name}\n{second.tail()}"
	if case.quarantined:
		expected = case.quarantined(victim_key, S1)
		wait_until(lambda: any(what.startswith(expected) for what in status(bench)["quarantine"]), 15, f"status lists {expected!r} as moved aside")
	ping = cli(bench.path, "ping", "--site", S1)
	assert ping.returncode == 0, f"ping: {ping.stdout} {ping.stderr}"
	assert second.stop() == 0
	for site, names in healthy.items():
		ids = site_job_ids(r, bench, site)
		assert duplicates(ids) == [], f"{site}: a slot enqueued twice"
		slots = slots_by_schedule(ids)
		for schedule_name in names:
			missing = gaps(slots[schedule_name])
			if case.gap_ok:
				# Deleting the prepared set deletes the fires prepared in it (up to prepare_ahead_secs).
				assert all(b - a <= 3000 and a >= injected_ms - 3000 for a, b in missing), f"{site} {schedule_name}: gaps {missing}"
			else:
				assert missing == [], f"{site} {schedule_name}: slots missing {missing}"
	assert "Traceback" not in first.log() + second.log()
