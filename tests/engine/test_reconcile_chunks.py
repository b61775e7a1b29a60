"""A full reconcile brings a big site in line a chunk at a time, the reconciler's lock released between chunks: an RPC's
edit, for that site or another, waits for one chunk, not for the whole site, and neither loses the other's change."""

from __future__ import annotations

import threading
from datetime import datetime, timezone

from btu.scheduler_daemon.reconcile import cycles, site_sync
from btu.scheduler_daemon.reconcile.reconciler import Reconciler
from btu.scheduler_daemon.store.state import State
from btu.shared import protocol
from btu.shared.keys import due_member
from devbench.data import SiteData
from tests.engine.helpers import wait_until
from tests.support.keys import KEYS
from tests.support.slack import patient

BIG, OTHER = "big.localhost", "other.localhost"
CHUNK = 10
ROWS = 6 * CHUNK  # six chunks to compile, whatever the order the database lists them in
FUNCTION = "btu_demo.demo_tasks.say_hello"
EDITS = 4


def utc_now() -> datetime:
	return datetime.now(timezone.utc)


def state_of(r, sites) -> dict:
	"""What the state holds of the sites: each schedule's definition and due score, the site's listing."""
	out = {}
	for site in sites:
		for name in sorted(n.decode() for n in r.smembers(KEYS.site_schedules_key(site))):
			out[(site, name)] = (
				r.get(KEYS.definition_key(site, name)),
				r.zscore(KEYS.due, due_member(site, name)),
			)
	return out


def enabled_rows(bench, site: str) -> set[str]:
	with SiteData(bench, site) as data, data.conn.cursor() as cur:
		cur.execute("SELECT name FROM `tabBTU Task Schedule` WHERE enabled = 1")
		return {row[0] for row in cur.fetchall()}


def test_edits_land_between_the_chunks_of_a_big_site_and_the_state_ends_equal_to_the_rows(make_bench, r, monkeypatch):
	monkeypatch.setattr(site_sync, "HOLD_CHUNK", CHUNK)
	bench = make_bench(BIG, OTHER)
	with SiteData(bench, BIG) as data:
		task = data.insert_task(function_string=FUNCTION, desc_short="big")
		names = [data.insert_schedule(task, run_frequency="Cron Style", cron_string="0 3 * * *") for _ in range(ROWS)]
	with SiteData(bench, OTHER) as data:
		other_task = data.insert_task(function_string=FUNCTION, desc_short="other")
		data.insert_schedule(other_task, run_frequency="Cron Style", cron_string="0 4 * * *")
	reconciler = Reconciler(bench.path, State(r, KEYS), "frappe", utc_now, lambda: None)
	reconciler.full()
	assert r.scard(KEYS.site_schedules_key(BIG)) == ROWS

	# The task's edit changes every schedule's version: the next full reconcile compiles all of them again.
	with SiteData(bench, BIG) as data:
		data.update("BTU Task", task, desc_short="big, edited")

	events: list[
		tuple
	] = []  # in the order they happened: ("chunk", n) at the end of a hold, ("edit", what) when its RPC returned
	record = threading.Lock()
	first_chunk = threading.Event()
	compiled_first: list[str] = []
	reconciling = []
	original = reconciler.compiler.apply_rows

	def apply_rows(site, read, rows, logged, versions):
		original(site, read, rows, logged, versions)
		if site.name != BIG or threading.current_thread() is not reconciling[0]:
			return  # an RPC's compile
		with record:
			events.append(("chunk", sum(1 for event in events if event[0] == "chunk") + 1))
			first = len([e for e in events if e[0] == "chunk"]) == 1
		if first:
			# Still in the chunk's hold: the edits arrive now, and wait for the lock.
			compiled_first.extend(row.name for row in rows)
			first_chunk.set()
			lock = reconciler.site_sync.lock
			wait_until(lambda: lock.waiting == EDITS, 30, "the edits waiting for the lock", interval=0.005)

	monkeypatch.setattr(reconciler.compiler, "apply_rows", apply_rows)
	failures: list[BaseException] = []

	def run_full():
		try:
			reconciler.full()
		except BaseException as exc:  # noqa: BLE001 - reported by the test thread
			failures.append(exc)
		with record:
			events.append(("done",))

	reconciling.append(threading.Thread(target=run_full))
	reconciling[0].start()
	assert first_chunk.wait(patient(60)), f"the full reconcile never compiled a chunk of the big site: {failures}"
	assert len(compiled_first) == CHUNK, f"the first hold compiled {len(compiled_first)} rows, not a chunk of {CHUNK}"

	# Edits committed while the first chunk is under way, each announced by its RPC after its commit, as Frappe does:
	# rows of the big site that the reconcile has yet to compile (one disabled, one given another cron), a new one
	# there, and a new one on another site.
	later = [name for name in names if name not in compiled_first]
	disabled, recronned = later[-1], later[0]
	with SiteData(bench, BIG) as data:
		data.update_schedule(disabled, enabled=0)
		data.update_schedule(recronned, cron_string="30 5 * * *")
		added = data.insert_schedule(task, run_frequency="Cron Style", cron_string="0 6 * * *")
	with SiteData(bench, OTHER) as data:
		other_added = data.insert_schedule(other_task, run_frequency="Cron Style", cron_string="0 7 * * *")

	def edit(site: str, name: str):
		def send():
			reconciler.sync(site, [name])
			with record:
				events.append(("edit", name))

		return threading.Thread(target=send)

	senders = [edit(BIG, disabled), edit(BIG, recronned), edit(BIG, added), edit(OTHER, other_added)]
	for sender in senders:
		sender.start()
	for sender in senders:
		sender.join(patient(60))
	reconciling[0].join(patient(120))
	assert not reconciling[0].is_alive() and not failures, failures

	chunks = [event for event in events if event[0] == "chunk"]
	assert len(chunks) >= ROWS // CHUNK, f"the big site was compiled in {len(chunks)} holds: {events}"
	second = events.index(("chunk", 2))
	landed = {event[1]: events.index(event) for event in events if event[0] == "edit"}
	assert set(landed) == {disabled, recronned, added, other_added}, events
	assert all(at < second for at in landed.values()), f"an edit waited for more than the chunk under way: {events}"

	# Each edit in effect, and none undone by the chunks compiled after it from rows they read.
	assert not r.sismember(KEYS.site_schedules_key(BIG), disabled), "the disabled schedule came back with a later chunk"
	assert r.zscore(KEYS.due, due_member(BIG, disabled)) is None
	assert b'"30 5 * * *"' in r.get(KEYS.definition_key(BIG, recronned))
	assert r.sismember(KEYS.site_schedules_key(BIG), added) and r.sismember(KEYS.site_schedules_key(OTHER), other_added)
	for site in (BIG, OTHER):
		assert {n.decode() for n in r.smembers(KEYS.site_schedules_key(site))} == enabled_rows(bench, site)

	# The state equals the rows: a new process compiling every row from scratch finds nothing to change.
	held = state_of(r, (BIG, OTHER))
	Reconciler(bench.path, State(r, KEYS), "frappe", utc_now, lambda: None).full()
	assert state_of(r, (BIG, OTHER)) == held
	# And this process's next pass finds every row as it compiled it.
	reconciler.full()
	assert state_of(r, (BIG, OTHER)) == held


def test_edits_while_a_reconcile_reads_a_sites_versions_land_at_once_and_are_not_undone(make_bench, r, monkeypatch):
	bench = make_bench(BIG)
	with SiteData(bench, BIG) as data:
		task = data.insert_task(function_string=FUNCTION, desc_short="big")
		names = [data.insert_schedule(task, run_frequency="Cron Style", cron_string="0 3 * * *") for _ in range(6)]
		off = data.insert_schedule(task, run_frequency="Cron Style", cron_string="0 8 * * *", enabled=0)
	reconciler = Reconciler(bench.path, State(r, KEYS), "frappe", utc_now, lambda: None)
	reconciler.full()
	assert not r.sismember(KEYS.site_schedules_key(BIG), off)
	with SiteData(bench, BIG) as data:
		data.update("BTU Task", task, desc_short="big, edited")  # every schedule's version changes

	original = reconciler.compiler.row_versions
	reconciling = threading.current_thread()
	landed: list[str] = []

	def row_versions(read, named):
		versions = original(read, named)
		if named is None and threading.current_thread() is reconciling and not landed:
			# The reconcile read the versions, without the lock; before it diffs them two edits land, each with its RPC:
			# one schedule it read as enabled is disabled, the one it read as disabled is enabled.
			with SiteData(bench, BIG) as data:
				data.update_schedule(names[0], enabled=0)
				data.update_schedule(off, enabled=1, cron_string="30 8 * * *")
			for name in (names[0], off):
				sender = threading.Thread(target=reconciler.sync, args=(BIG, [name]))
				sender.start()
				sender.join(patient(30))
				assert not sender.is_alive(), "an edit waited for a reconcile reading a site's versions"
				landed.append(name)
		return versions

	monkeypatch.setattr(reconciler.compiler, "row_versions", row_versions)
	reconciler.full()
	assert landed == [names[0], off]
	assert not r.sismember(KEYS.site_schedules_key(BIG), names[0]), (
		"the disabled schedule came back from the older versions"
	)
	assert r.sismember(KEYS.site_schedules_key(BIG), off), "the enabled schedule was taken out by the older versions"
	assert b'"30 8 * * *"' in r.get(KEYS.definition_key(BIG, off))
	assert {n.decode() for n in r.smembers(KEYS.site_schedules_key(BIG))} == enabled_rows(bench, BIG)
	held = state_of(r, (BIG,))
	Reconciler(bench.path, State(r, KEYS), "frappe", utc_now, lambda: None).full()
	assert state_of(r, (BIG,)) == held


def test_an_edit_waits_for_one_chunk_of_the_audit_not_for_the_whole_audit(make_bench, r, monkeypatch):
	"""The audit of every firing schedule took one hold of the lock: at a million schedules an RPC's edit waited 6 s
	behind it. It goes a chunk a hold now, and an edit that arrives during a chunk lands before the next one."""
	monkeypatch.setattr(cycles, "AUDIT_CHUNK", CHUNK)
	bench = make_bench(BIG)
	with SiteData(bench, BIG) as data:
		task = data.insert_task(function_string=FUNCTION, desc_short="big")
		for _ in range(3 * CHUNK):
			data.insert_schedule(task, run_frequency="Cron Style", cron_string="0 3 * * *")
	reconciler = Reconciler(bench.path, State(r, KEYS), "frappe", utc_now, lambda: None)
	reconciler.full()
	with SiteData(bench, BIG) as data:
		added = data.insert_schedule(task, run_frequency="Cron Style", cron_string="0 6 * * *")

	events: list[tuple] = []
	record = threading.Lock()
	senders: list[threading.Thread] = []
	original = reconciler.state.audit

	def audit(members):
		with record:
			events.append(("chunk", len(members)))
		if len(events) == 1:
			# Still in the first chunk's hold: the edit's RPC arrives now, and waits for the lock.
			def send():
				reconciler.sync(BIG, [added])
				with record:
					events.append(("edit",))

			senders.append(threading.Thread(target=send))
			senders[0].start()
			lock = reconciler.site_sync.lock
			wait_until(lambda: lock.waiting == 1, 30, "the edit waiting for the lock", interval=0.005)
		return original(members)

	monkeypatch.setattr(reconciler.state, "audit", audit)
	reconciler.cycles.next_audit = 0.0  # due now
	reconciler.full()
	senders[0].join(patient(60))
	assert not senders[0].is_alive(), "the edit never landed"
	chunks = [at for at, event in enumerate(events) if event[0] == "chunk"]
	assert [events[at][1] for at in chunks] == [CHUNK, CHUNK, CHUNK], f"the audit went in other holds: {events}"
	assert events.index(("edit",)) < chunks[1], f"the edit waited for more than one chunk: {events}"
	assert r.sismember(KEYS.site_schedules_key(BIG), added)
