"""A Redis that lost its scripts (SCRIPT FLUSH, as a restart or a promoted replica without them): a compile still lands.

The reconcile runs the upsert script by its sha in one pipeline a site; redis-py's own script objects would have
loaded it first, so the recovery from NOSCRIPT is the scheduler's, and each redis-py reports it its own way.
"""

from __future__ import annotations

from datetime import datetime, timezone

import pytest

from btu.scheduler_daemon.reconcile.reconciler import Reconciler
from btu.scheduler_daemon.store.state import State
from btu.shared import protocol
from btu.shared.keys import due_member
from tests.support.keys import KEYS

pytestmark = pytest.mark.versions


def test_a_compile_after_the_scripts_were_flushed_lands(engine_bench, r):
	bench, data = engine_bench()
	site = data.site.name
	task = data.insert_task(function_string="tests.engine.tasks.record", desc_short="record")
	first = data.insert_schedule(task, run_frequency="Cron Style", cron_string="0 3 * * *")
	reconciler = Reconciler(bench.path, State(r, KEYS), "rq", lambda: datetime.now(timezone.utc), lambda: None)
	reconciler.full()
	assert reconciler.state.names(site) == {first}

	r.script_flush()
	second = data.insert_schedule(task, run_frequency="Cron Style", cron_string="0 4 * * *")
	reconciler.sync(site, [second])
	assert reconciler.state.names(site) == {first, second}
	assert r.zscore(KEYS.due, due_member(site, second)) is not None
	assert r.sismember(KEYS.sites, site)
