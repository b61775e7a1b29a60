"""A cold reconcile reads sites' rows ahead of the compile, side by side, but only a few sites ahead: every site's
rows read at once held them all in memory (100 sites x 1,000 rows: 320 MB of the scheduler's RSS)."""

from __future__ import annotations

import time
from datetime import datetime, timezone

from btu.scheduler_daemon.reads.connections import Connections
from btu.scheduler_daemon.reads.database import connect
from btu.scheduler_daemon.reads.site_reader import read_sites
from btu.scheduler_daemon.reconcile import site_rows
from btu.scheduler_daemon.reconcile.reconciler import Reconciler
from btu.scheduler_daemon.store.state import State
from tests.engine.test_stagger import add_schedule
from tests.support.keys import KEYS

SITES = tuple(f"ahead{i}.localhost" for i in range(12))


def test_rows_are_read_only_a_few_sites_ahead_of_the_compile(make_bench, r):
	bench = make_bench(*SITES)
	for site in SITES:
		add_schedule(bench, site)
	connections = Connections(connect)
	reconciler = Reconciler(
		bench.path, State(r, KEYS), "frappe", lambda: datetime.now(timezone.utc), lambda: None, connections=connections
	)
	compiler = reconciler.compiler
	read = []

	def rows_of(site_read):
		read.append(site_read.db.site.name)
		return compiler.rows_ahead(site_read)

	sites = [compiler.bench.site(name) for name in SITES]
	reads = read_sites([reconciler.database(site) for site in sites], compiler.bench, "frappe", connections.limit)
	ahead = site_rows.read_ahead(sites, reads, compiler.cold, rows_of, connections.limit)
	first_site, first_rows = next(ahead)
	time.sleep(1)  # every read the window allows is done by now
	threads = connections.limit - 1
	assert first_site.name == SITES[0] and first_rows is not None and first_rows.versions
	assert len(read) == threads * site_rows.AHEAD_PER_THREAD + 1, (
		f"read {len(read)} sites ahead of the first compile: {read}"
	)
	assert [site.name for site, rows in ahead if rows is not None] == list(SITES[1:]), (
		"every site still comes, in order"
	)
