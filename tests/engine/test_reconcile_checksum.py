"""A periodic reconcile reads every row's version only when the table's checksum moved."""

from __future__ import annotations

from datetime import datetime, timezone

from btu.scheduler_daemon.database import DatabaseError
from btu.scheduler_daemon.reconcile import Reconciler
from btu.scheduler_daemon.state import State
from btu.shared import protocol
from tests.engine.helpers import definition


class CountingReconciler(Reconciler):
	"""Counts the per-row version reads (the expensive part the checksum avoids)."""

	row_reads = 0

	def row_versions(self, read, names):
		if names is None:
			self.row_reads += 1
		return super().row_versions(read, names)


def test_unchanged_table_skips_the_row_read_and_every_change_is_seen(engine_bench, r):
	bench, data = engine_bench()
	site = data.site.name
	task = data.insert_task(function_string="tests.engine.tasks.record", desc_short="record")
	names = [data.insert_schedule(task, run_frequency="Cron Style", cron_string="0 3 * * *") for _ in range(3)]
	reconciler = CountingReconciler(bench.path, State(r), "rq", lambda: datetime.now(timezone.utc), lambda: None)

	def spec_of(name):
		return definition(r, site, name)[0]

	reconciler.full()
	assert reconciler.row_reads == 1 and len(reconciler.state.names(site)) == 3
	reconciler.full()
	assert reconciler.row_reads == 1  # nothing changed: checksum only

	# Changes written straight into the table, as Frappe or an admin's SQL would.
	before = spec_of(names[0])
	data.update_schedule(names[0], cron_string="30 4 * * *")
	reconciler.full()
	assert reconciler.row_reads == 2 and spec_of(names[0]) != before

	with data.conn.cursor() as cur:  # no modified stamp: the checksum still covers enabled
		cur.execute("UPDATE `tabBTU Task Schedule` SET enabled=0 WHERE name=%s", (names[1],))
	reconciler.full()
	assert reconciler.row_reads == 3 and names[1] not in reconciler.state.names(site)

	data.delete_schedule(names[2])
	reconciler.full()
	assert reconciler.row_reads == 4 and reconciler.state.names(site) == {names[0]}

	# A schedule taken out of the state (not through its row) is compared with the table again next time.
	reconciler.remove(site, names[0], reason="test")
	reconciler.full()
	assert reconciler.row_reads == 5 and reconciler.state.names(site) == {names[0]}


class FailingOnce(CountingReconciler):
	"""Its database fails while the changed rows are read, once, after `fail` is set."""

	fail = False

	def apply(self, site, read, names, versions):
		if self.fail:
			self.fail = False
			raise DatabaseError(f"site {site.name}: gone while reading rows (test)")
		super().apply(site, read, names, versions)


def test_a_database_failing_amid_a_reconcile_is_diffed_again_next_time(engine_bench, r):
	bench, data = engine_bench()
	site = data.site.name
	task = data.insert_task(function_string="tests.engine.tasks.record", desc_short="record")
	name = data.insert_schedule(task, run_frequency="Cron Style", cron_string="0 3 * * *")
	reconciler = FailingOnce(bench.path, State(r), "rq", lambda: datetime.now(timezone.utc), lambda: None)
	reconciler.full()
	before = definition(r, site, name)[0]

	data.update_schedule(name, cron_string="30 4 * * *")
	reconciler.fail = True
	reconciler.full()
	assert site in reconciler.health().unreachable and definition(r, site, name)[0] == before

	reconciler.full()  # same checksum as the failed reconcile read: the rows are read all the same
	assert site not in reconciler.health().unreachable and definition(r, site, name)[0] != before
