"""A schedule's state is a small hash plus its definition (spec and job template) under a key of its own, so that
Redis keeps the hash compact (a listpack) whatever the length of the two documents; a state written before the
definition had its key still fires, and its next reconcile moves the documents out of the hash."""

from __future__ import annotations

from datetime import datetime, timezone

from btu.scheduler_daemon.reconcile.reconciler import Reconciler
from btu.scheduler_daemon.store.fires import DueEntry
from btu.scheduler_daemon.store.state import State
from btu.shared import protocol
from tests.engine.helpers import definition, text
from tests.support.keys import KEYS

COMPACT_ENCODINGS = {"listpack", "ziplist"}  # Redis 7's and 6's names for the compact form


def compiled(engine_bench, r, description: str = "x" * 120):
	bench, data = engine_bench()
	task = data.insert_task(function_string="tests.engine.tasks.record", desc_short=description)
	name = data.insert_schedule(task, run_frequency="Cron Style", cron_string="0 3 * * *")
	reconciler = Reconciler(bench.path, State(r, KEYS), "rq", lambda: datetime.now(timezone.utc), lambda: None)
	reconciler.full()
	return reconciler, data.site.name, name


def test_the_state_hash_stays_compact_with_long_documents(engine_bench, r):
	reconciler, site, name = compiled(engine_bench, r)
	spec, job = definition(r, site, name)
	assert "0 3 * * *" in spec and "x" * 120 in job, "the definition holds the spec and the job template"
	key = KEYS.schedule_key(site, name)
	assert not r.hexists(key, "spec") and not r.hexists(key, "job")
	assert text(r.object("encoding", key)) in COMPACT_ENCODINGS, (
		"a value over hash-max-listpack-value made it a hash table"
	)
	[state] = reconciler.state.read([DueEntry(site, name, 0)])
	assert (state["spec"], state["job"]) == (spec, job) and state["cursor"]


def test_a_state_from_before_the_definition_key_reads_and_is_moved_by_its_next_upsert(engine_bench, r):
	reconciler, site, name = compiled(engine_bench, r)
	spec, job = definition(r, site, name)
	key = KEYS.schedule_key(site, name)
	r.delete(KEYS.definition_key(site, name))
	r.hset(key, mapping={"spec": spec, "job": job})  # as upsert.lua wrote it before
	[state] = reconciler.state.read([DueEntry(site, name, 0)])
	assert (state["spec"], state["job"]) == (spec, job), (
		"the firing loop reads the old layout until the reconcile comes"
	)
	reconciler.compiler.forget_everything()  # this process compiles the site again, as a new scheduler process does
	reconciler.full()
	assert definition(r, site, name) == (spec, job) and not r.hexists(key, "spec") and not r.hexists(key, "job")


def test_removing_a_schedule_removes_its_definition(engine_bench, r):
	reconciler, site, name = compiled(engine_bench, r)
	assert reconciler.state.remove(site, name)
	assert r.exists(KEYS.definition_key(site, name)) == 0 and r.exists(KEYS.schedule_key(site, name)) == 0
