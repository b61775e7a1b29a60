"""The Lua scripts spell no key: they build keys with the functions scripts.py generates from the bench's `Keys`."""

from __future__ import annotations

import re
from importlib import resources

import pytest
from rq import Queue

from btu.scheduler_daemon.store import scripts
from btu.shared.keys import Keys
from tests.support.keys import KEYS

pytestmark = pytest.mark.versions

LITERAL_KEY = re.compile(r"""['"](btu|rq):""")


def test_no_script_holds_a_literal_key_name():
	lua = resources.files("btu.scheduler_daemon.store").joinpath("lua")
	found = {
		entry.name: line.strip()
		for entry in lua.iterdir()
		if entry.name.endswith(".lua")
		for line in entry.read_text().splitlines()
		if LITERAL_KEY.search(line) and not line.lstrip().startswith("--")
	}
	assert found == {}, "spell keys in btu/shared/keys.py (SITE_KEY_SUFFIXES, Keys) and use the generated names"


@pytest.mark.parametrize("keys", [KEYS, Keys("bench-a")], ids=["seed", "namespace"])
def test_generated_key_functions_build_the_benchs_keys(r, keys):
	site, schedule = "a.b-c:d'e\\f", "TS-0001 |x"
	calls = {
		"schedule_key": (site, schedule),
		"definition_key": (site, schedule),
		"prepared_index_key": (site, schedule),
		"site_schedules_key": (site,),
		"recent_fires_key": (site,),
		"invalid_rows_key": (site,),
		"counters_key": (site,),
		"task_running_key": (site, "BTU-0001 |y"),
	}
	assert set(calls) == set(keys.site_key_templates)
	returned = (
		"return {"
		+ ", ".join(f"{name}(ARGV[1], ARGV[{3 if name == 'task_running_key' else 2}])" for name in calls)
		+ ", QUARANTINE, QUARANTINED, RESYNC, RQ_QUEUE_PREFIX}"
	)
	got = [
		value.decode()
		for value in r.eval(scripts.key_names(keys) + returned, 0, site, schedule, calls["task_running_key"][1])
	]
	expected = [getattr(keys, name)(*args) for name, args in calls.items()]
	assert got == [
		*expected,
		keys.quarantine,
		keys.quarantined_prefix,
		keys.resync,
		Queue.redis_queue_namespace_prefix,
	]
