"""A periodic reconcile reads every row's version only when the table's checksum moved."""

from __future__ import annotations

from datetime import datetime, timezone

from btu.scheduler_daemon.reads.database import DatabaseError
from btu.scheduler_daemon.reconcile.reconciler import Reconciler
from btu.scheduler_daemon.reconcile.site_compiler import SiteCompiler
from btu.scheduler_daemon.store.state import State
from btu.shared import protocol
from tests.engine.helpers import definition
from tests.support.keys import KEYS


class RowReads:
	"""Counts a compiler's per-row version reads (the expensive part the checksum avoids)."""

	def __init__(self, compiler: SiteCompiler):
		self.count = 0
		self.versions = compiler.row_versions
		compiler.row_versions = self.row_versions

	def row_versions(self, read, names):
		if names is None:
			self.count += 1
		return self.versions(read, names)


def test_unchanged_table_skips_the_row_read_and_every_change_is_seen(engine_bench, r):
	bench, data = engine_bench()
	site = data.site.name
	task = data.insert_task(function_string="tests.engine.tasks.record", desc_short="record")
	names = [data.insert_schedule(task, run_frequency="Cron Style", cron_string="0 3 * * *") for _ in range(3)]
	reconciler = Reconciler(bench.path, State(r, KEYS), "rq", lambda: datetime.now(timezone.utc), lambda: None)
	row_reads = RowReads(reconciler.compiler)

	def spec_of(name):
		return definition(r, site, name)[0]

	reconciler.full()
	assert row_reads.count == 1 and len(reconciler.state.names(site)) == 3
	reconciler.full()
	assert row_reads.count == 1  # nothing changed: checksum only

	# Changes written straight into the table, as Frappe or an admin's SQL would.
	before = spec_of(names[0])
	data.update_schedule(names[0], cron_string="30 4 * * *")
	reconciler.full()
	assert row_reads.count == 2 and spec_of(names[0]) != before

	with data.conn.cursor() as cur:  # no modified stamp: the checksum still covers enabled
		cur.execute("UPDATE `tabBTU Task Schedule` SET enabled=0 WHERE name=%s", (names[1],))
	reconciler.full()
	assert row_reads.count == 3 and names[1] not in reconciler.state.names(site)

	data.delete_schedule(names[2])
	reconciler.full()
	assert row_reads.count == 4 and reconciler.state.names(site) == {names[0]}

	# A schedule taken out of the state (not through its row) is compared with the table again next time.
	reconciler.compiler.remove(site, names[0], reason="test")
	reconciler.full()
	assert row_reads.count == 5 and reconciler.state.names(site) == {names[0]}


class FailingOnce:
	"""The compiler's database fails while the changed rows are read, once, after `fail` is set."""

	def __init__(self, compiler: SiteCompiler):
		self.fail = False
		self.compile = compiler.apply
		compiler.apply = self.apply

	def apply(self, site, read, names, versions):
		if self.fail:
			self.fail = False
			raise DatabaseError(f"site {site.name}: gone while reading rows (test)")
		self.compile(site, read, names, versions)


def test_a_database_failing_amid_a_reconcile_is_diffed_again_next_time(engine_bench, r):
	bench, data = engine_bench()
	site = data.site.name
	task = data.insert_task(function_string="tests.engine.tasks.record", desc_short="record")
	name = data.insert_schedule(task, run_frequency="Cron Style", cron_string="0 3 * * *")
	reconciler = Reconciler(bench.path, State(r, KEYS), "rq", lambda: datetime.now(timezone.utc), lambda: None)
	failing = FailingOnce(reconciler.compiler)
	reconciler.full()
	before = definition(r, site, name)[0]

	data.update_schedule(name, cron_string="30 4 * * *")
	failing.fail = True
	reconciler.full()
	assert site in reconciler.health().unreachable and definition(r, site, name)[0] == before

	reconciler.full()  # same checksum as the failed reconcile read: the rows are read all the same
	assert site not in reconciler.health().unreachable and definition(r, site, name)[0] != before
