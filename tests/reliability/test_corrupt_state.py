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
from collections.abc import Callable
from dataclasses import dataclass

import pytest

from btu.scheduler_daemon.store.outcomes import FireOutcome
from btu.shared import protocol
from btu.shared.keys import due_member
from devbench.data import SiteData
from tests.engine.helpers import ONE_SECOND, cli, definition, duplicates, gaps, slots_by_schedule, wait_until
from tests.reliability.helpers import site_job_ids
from tests.support.keys import KEYS

SITES = ("site1.localhost", "site2.localhost")
S1 = SITES[0]
FLAGS = ("--lease-ttl-secs", "1", "--full-refresh-interval-secs", "1")


@dataclass
class Case:
	inject: Callable  # (r, site, victim schedule) -> None
	quarantined: Callable[[str, str], str] | None = None  # (site, victim) -> what status lists as moved aside
	deletes_fires: bool = False  # the corruption deletes prepared fires: their slots are lost


def now_ms(r) -> int:
	seconds, micros = r.time()
	return seconds * 1000 + micros // 1000


def replace(r, key: str, value=("set", "junk")) -> None:
	"""Put a value of another type at `key`, in one transaction: a scheduler writing the key between a delete and
	a write of another type would fail the write with WRONGTYPE."""
	command, *args = value
	with r.pipeline(transaction=True) as pipe:
		pipe.delete(key)
		getattr(pipe, command)(key, *args)
		pipe.execute()


def forged_member(r, site: str, victim: str) -> str:
	"""A member in prepare.lua's form whose state key is another schedule's."""
	fields = ["forged", "rq:queue:x", KEYS.schedule_key("other.localhost", victim), KEYS.counters_key(site)]
	return "\t".join([*fields, due_member(site, victim), "1", "1", "0", "1"])


def look_alike_member(site: str, victim: str) -> str:
	"""A member naming the victim's own keys whose numbers Lua's tonumber reads and Python's int refuses."""
	fields = [
		"look-alike",
		"rq:queue:x",
		KEYS.schedule_key(site, victim),
		KEYS.counters_key(site),
		due_member(site, victim),
	]
	return "\t".join([*fields, "1e3", "0x10", "0", " 5"])


STATE = KEYS.schedule_key
DEFINITION = KEYS.definition_key
# Every kind of key and member BTU owns, each made wrong in one way; the chaos benchmark uses them too.
CASES = {
	"schedule state is a string": Case(lambda r, s, v: replace(r, STATE(s, v)), STATE),
	"cursor is text": Case(lambda r, s, v: r.hset(STATE(s, v), "cursor", "abc"), STATE),
	"cursor out of range": Case(lambda r, s, v: r.hset(STATE(s, v), "cursor", "9" * 25), STATE),
	"fire_at is text": Case(lambda r, s, v: r.hset(STATE(s, v), "fire_at", "soon")),  # the next prepare writes it anew
	"runs is text": Case(lambda r, s, v: r.hset(STATE(s, v), "runs", "many"), STATE),
	"spec is not JSON": Case(lambda r, s, v: r.set(DEFINITION(s, v), "{not json\n" + definition(r, s, v)[1]), STATE),
	"job is not a template": Case(
		lambda r, s, v: r.set(DEFINITION(s, v), definition(r, s, v)[0] + "\n" + json.dumps({"queue": 1})), STATE
	),
	"definition is a hash": Case(lambda r, s, v: replace(r, DEFINITION(s, v), ("hset", "spec", "{}")), STATE),
	"due entry far in the future": Case(lambda r, s, v: r.zadd(KEYS.due, {due_member(s, v): 10**15})),
	"due entry gone": Case(lambda r, s, v: r.zrem(KEYS.due, due_member(s, v))),
	"counter holds text": Case(
		lambda r, s, v: r.hset(KEYS.counters_key(s), FireOutcome.ENQUEUED, "lots"),
		lambda s, v: f"{KEYS.counters_key(s)} enqueued",
	),
	"counters are a string": Case(lambda r, s, v: replace(r, KEYS.counters_key(s)), lambda s, v: KEYS.counters_key(s)),
	"junk prepared member due now": Case(
		lambda r, s, v: r.zadd(KEYS.prepared, {"junk": now_ms(r)}),
		lambda s, v: f"{KEYS.prepared} member",
	),
	"junk prepared member far ahead": Case(
		lambda r, s, v: r.zadd(KEYS.prepared, {"a\tb\tc": now_ms(r) + 10**9}),
		lambda s, v: f"{KEYS.prepared} member",
	),
	"forged prepared member naming another schedule's keys": Case(
		lambda r, s, v: r.zadd(KEYS.prepared, {forged_member(r, s, v): now_ms(r)}),
		lambda s, v: f"{KEYS.prepared} member",
	),
	"prepared member with numbers Lua and Python read apart": Case(
		lambda r, s, v: r.zadd(KEYS.prepared, {look_alike_member(s, v): now_ms(r)}),
		lambda s, v: f"{KEYS.prepared} member",
	),
	"due set is a string": Case(lambda r, s, v: replace(r, KEYS.due), lambda s, v: KEYS.due),
	"prepared set is a hash": Case(
		lambda r, s, v: replace(r, KEYS.prepared, ("hset", "a", "b")),
		lambda s, v: KEYS.prepared,
		deletes_fires=True,
	),
	"prepared index is a string": Case(lambda r, s, v: replace(r, KEYS.prepared_index_key(s, v))),
	"site's schedule set is a string": Case(
		lambda r, s, v: replace(r, KEYS.site_schedules_key(s)), lambda s, v: KEYS.site_schedules_key(s)
	),
	"recent fires are a hash": Case(
		lambda r, s, v: replace(r, KEYS.recent_fires_key(s), ("hset", "a", "b")),
		lambda s, v: KEYS.recent_fires_key(s),
	),
	"invalid rows are a list": Case(
		lambda r, s, v: replace(r, KEYS.invalid_rows_key(s), ("rpush", "a")),
		lambda s, v: KEYS.invalid_rows_key(s),
	),
	"sites set is a string": Case(lambda r, s, v: replace(r, KEYS.sites), lambda s, v: KEYS.sites),
	"lease is junk without expiry": Case(lambda r, s, v: r.set(KEYS.leader, "junk"), lambda s, v: KEYS.leader),
	"lease is a hash": Case(lambda r, s, v: replace(r, KEYS.leader, ("hset", "a", "b")), lambda s, v: KEYS.leader),
	"lease lives for a year": Case(
		lambda r, s, v: r.set(KEYS.leader, "999|nobody:1:x", px=365 * 86400 * 1000),
		lambda s, v: KEYS.leader,
	),
	"epoch is text": Case(lambda r, s, v: r.set(KEYS.leader_epoch, "abc"), lambda s, v: KEYS.leader_epoch),
	"generation is a hash": Case(
		lambda r, s, v: replace(r, KEYS.generation, ("hset", "a", "b")), lambda s, v: KEYS.generation
	),
	"processes are a string": Case(lambda r, s, v: replace(r, KEYS.processes)),
	"command list is a string": Case(lambda r, s, v: replace(r, KEYS.commands), lambda s, v: KEYS.commands),
	"quarantine record is a string": Case(
		lambda r, s, v: (replace(r, KEYS.quarantine), r.hset(STATE(s, v), "cursor", "abc")),
		STATE,
	),
	"resync set is a string": Case(
		lambda r, s, v: (replace(r, KEYS.resync), r.hset(STATE(s, v), "cursor", "abc")), STATE
	),
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
	task = data.insert_task(
		function_string="tests.engine.tasks.record", arguments={"key": "test:runs"}, desc_short="record"
	)
	schedule = dict(run_frequency="Cron Style", cron_string=ONE_SECOND, catch_up_policy="fire_all", catch_up_max=100)
	healthy = {S1: [data.insert_schedule(task, **schedule) for _ in range(2)]}
	victim = data.insert_schedule(task, **schedule)
	with SiteData(bench, SITES[1]) as other:
		other_task = other.insert_task(
			function_string="tests.engine.tasks.record", arguments={"key": "test:runs"}, desc_short="record"
		)
		healthy[SITES[1]] = [other.insert_schedule(other_task, **schedule) for _ in range(2)]

	first = processes.scheduler(bench.path, *FLAGS)
	wait_until(
		lambda: all(len(fires(r, bench, site).get(n, [])) >= 2 for site, names in healthy.items() for n in names),
		30,
		"healthy fires",
	)
	case.inject(r, S1, victim)
	injected_ms = now_ms(r)
	# Mended while running, not only by a restart: the audit runs every 5 full reconciles (5 s here).
	wait_until(lambda: max(fires(r, bench, S1).get(victim, [0])) > injected_ms + 1000, 20, "the victim fires again")
	assert first.alive(), f"the scheduler exited on: {name}\n{first.tail()}"
	status(bench)

	# A scheduler started on the faulty state works too.
	first.signal(signal.SIGKILL)
	first.process.wait()
	case.inject(r, S1, victim)
	second = processes.scheduler(bench.path, *FLAGS)
	restarted_ms = now_ms(r)
	wait_until(
		lambda: all(
			max(fires(r, bench, site).get(n, [0])) > restarted_ms + 3000
			for site, names in healthy.items()
			for n in names
		),
		40,
		"healthy fires after the restart",
	)
	wait_until(lambda: max(fires(r, bench, S1).get(victim, [0])) > restarted_ms + 3000, 30, "the victim fires again")
	assert second.alive(), f"the second scheduler exited on: {name}\n{second.tail()}"
	if case.quarantined:
		expected = case.quarantined(S1, victim)
		wait_until(
			lambda: any(what.startswith(expected) for what in status(bench)["quarantine"]),
			15,
			f"status lists {expected!r} as moved aside",
		)
	ping = cli(bench.path, "ping", "--site", S1)
	assert ping.returncode == 0, f"ping: {ping.stdout} {ping.stderr}"
	assert second.stop() == 0, f"the second scheduler did not stop on SIGTERM:\n{second.tail(120)}"
	for site, names in healthy.items():
		ids = site_job_ids(r, bench, site)
		assert duplicates(ids) == [], f"{site}: a slot enqueued twice"
		slots = slots_by_schedule(ids)
		for schedule_name in names:
			missing = gaps(slots[schedule_name])
			if case.deletes_fires:
				# Deleting the prepared set deletes the fires prepared in it (up to prepare_ahead_secs).
				assert all(b - a <= 3000 and a >= injected_ms - 3000 for a, b in missing), (
					f"{site} {schedule_name}: gaps {missing}"
				)
			else:
				assert missing == [], f"{site} {schedule_name}: slots missing {missing}"
	assert not r.exists("rq:queue:x"), "a forged member's id was pushed on the queue it named"
	assert "Traceback" not in first.log() + second.log()


def test_a_wrong_resync_set_does_not_lose_the_schedule_moved_aside(engine_bench, r):
	"""The race the case above can lose: a state moved aside while the resync set holds a wrong value, before any
	reconcile moved that value aside. The member must reach a new resync set, or the schedule is never rebuilt."""
	from tests.engine.test_prepare_release import leader, prepare_due

	bench, data = engine_bench(S1)
	task = data.insert_task(
		function_string="tests.engine.tasks.record", arguments={"key": "test:runs"}, desc_short="record"
	)
	victim = data.insert_schedule(task, run_frequency="Cron Style", cron_string=ONE_SECOND)
	scheduler = leader(bench)
	replace(r, KEYS.resync, ("set", "a string"))
	r.hset(STATE(S1, victim), "cursor", "abc")
	prepare_due(scheduler)  # finds the wrong cursor first: the state goes aside and is to be resynced
	assert not r.exists(STATE(S1, victim))
	assert r.smembers(KEYS.resync) == {due_member(S1, victim).encode()}
	assert r.exists(KEYS.quarantined_prefix + KEYS.resync), "the string was moved aside, not overwritten"
	scheduler.reconciler.full()
	assert r.hget(STATE(S1, victim), "cursor").decode().isdigit(), "rebuilt from its row"
	assert r.zscore(KEYS.due, due_member(S1, victim)) is not None
