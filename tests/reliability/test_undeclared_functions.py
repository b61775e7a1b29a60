"""The rq executor's jobs call a Task's function directly: one no installed app declares is an invalid row.

Rows are written with SQL (as a Desk bypass or an old row would be), a real
scheduler (rq executor) and a real `rq worker` run: the undeclared functions
are listed as invalid with their reason and never reach Redis as jobs, while
the declared one fires. The escape hatch then lets an undeclared function of
an installed app fire, and still not os.system.
"""

from __future__ import annotations

import json

import pytest

from btu.shared import protocol
from tests.engine.helpers import ONE_SECOND, parse_job_id, text, wait_until
from tests.support.keys import KEYS

pytestmark = pytest.mark.versions

EVERY_SECOND = {"run_frequency": "Cron Style", "cron_string": ONE_SECOND}
UNDECLARED_KEY = "test:undeclared"


def undeclared(marker) -> dict[str, tuple[str, dict, str]]:
	"""Case -> (function_string, arguments, what its reason must say)."""
	return {
		"os-system": ("os.system", {"command": f"touch {marker}"}, "'os' is not an installed app"),
		"subprocess": ("subprocess.getoutput", {"cmd": f"touch {marker}"}, "'subprocess' is not an installed app"),
		"builtins-exec": ("builtins.exec", {"source": f"open('{marker}', 'w')"}, "'builtins' is not an installed app"),
		"look-alike-app": ("btu_evil.tasks.run", {}, "'btu_evil' is not an installed app"),
		"imported-name": (
			"tests.engine.tasks.get_current_job",
			{},
			"is defined in rq and only imported into tests.engine.tasks",
		),
		"undeclared": (
			"tests.engine.tasks.record_undeclared",
			{"key": UNDECLARED_KEY},
			"is not declared runnable by BTU",
		),
	}


def invalid(r, site: str) -> dict[str, str]:
	return {text(k): text(v) for k, v in r.hgetall(KEYS.invalid_rows_key(site)).items()}


def jobs_of(r, names) -> list[str]:
	"""Every rq job in Redis (queued, started, finished or failed) of the schedules `names`."""
	ids = [text(key).removeprefix("rq:job:") for key in r.scan_iter("rq:job:*")]
	return [job for job in ids if "btu" in job and parse_job_id(job)[0] in names]


def test_undeclared_functions_never_reach_a_queue_and_the_escape_hatch_opens_only_installed_apps(
	engine_bench, processes, r, tmp_path
):
	bench, data = engine_bench()
	site = data.site.name
	marker = tmp_path / "ran"
	good = data.insert_schedule(
		data.insert_task(function_string="tests.engine.tasks.record", arguments={"key": "test:runs"}), **EVERY_SECOND
	)
	cases = undeclared(marker)
	names = {}
	for case, (function, arguments, _) in cases.items():
		task = data.insert_task(function_string=function, arguments=arguments, desc_short=case)
		names[case] = data.insert_schedule(task, **EVERY_SECOND)
	scheduler = processes.scheduler(bench.path, "--full-refresh-interval-secs", "1")
	processes.worker(bench.redis_queue_url, bench.queue_name("default"))

	wait_until(lambda: r.llen("test:runs") >= 3, 30, f"the declared function runs\n{scheduler.tail()}")
	wait_until(lambda: set(names.values()) <= set(invalid(r, site)), 10, "every undeclared function is an invalid row")
	reasons = invalid(r, site)
	for case, (function, _, words) in cases.items():
		reason = reasons[names[case]]
		assert f"function_string '{function}'" in reason and words in reason, f"{case}: {reason}"
	assert "btu_tasks" in reasons[names["undeclared"]] and "@runnable" in reasons[names["undeclared"]]
	assert good not in reasons
	assert jobs_of(r, set(names.values())) == [], "an undeclared function's job reached Redis"
	assert jobs_of(r, {good}), "the declared function's jobs are found the same way"
	assert r.llen(UNDECLARED_KEY) == 0 and not marker.exists()

	# The escape hatch (shell access only: common_site_config.json) opens undeclared functions of installed apps.
	common = bench.sites_path / "common_site_config.json"
	common.write_text(json.dumps({**json.loads(common.read_text()), "btu_allow_any_app_function": 1}))
	wait_until(
		lambda: r.llen(UNDECLARED_KEY) >= 1,
		30,
		f"the undeclared function of an installed app runs with the escape hatch\n{scheduler.tail()}",
	)
	reasons = invalid(r, site)
	assert names["undeclared"] not in reasons
	for case in ("os-system", "subprocess", "builtins-exec", "look-alike-app", "imported-name"):
		assert names[case] in reasons, f"{case} became runnable with the escape hatch"
	assert jobs_of(r, {names[case] for case in cases if case != "undeclared"}) == []
	assert not marker.exists()


def test_the_frappe_executor_never_fires_an_undeclared_function_either(engine_bench, processes, r, tmp_path):
	# Its task runner refuses one at run time; the scheduler lists it as invalid before, so nothing is queued and
	# a site upgraded from the original BTU (which ran any callable) sees why each such schedule does not run.
	bench, data = engine_bench()
	site = data.site.name
	good = data.insert_schedule(
		data.insert_task(function_string="tests.engine.tasks.record", arguments={"key": "test:runs"}), **EVERY_SECOND
	)
	cases = undeclared(tmp_path / "ran")
	names = {
		case: data.insert_schedule(
			data.insert_task(function_string=function, arguments=arguments, desc_short=case), **EVERY_SECOND
		)
		for case, (function, arguments, _) in cases.items()
	}
	scheduler = processes.scheduler(bench.path, "--full-refresh-interval-secs", "1", executor="frappe")
	wait_until(lambda: jobs_of(r, {good}), 30, f"the declared function's schedule fires\n{scheduler.tail()}")
	wait_until(lambda: set(names.values()) <= set(invalid(r, site)), 10, "every undeclared function is an invalid row")
	reasons = invalid(r, site)
	for case, (function, _, words) in cases.items():
		assert f"function_string '{function}'" in reasons[names[case]] and words in reasons[names[case]], case
	assert good not in reasons
	assert jobs_of(r, set(names.values())) == []

	# The site's own escape hatch counts here (its task runner reads the site's config): an undeclared function of
	# an installed app fires, nothing outside one does.
	config = bench.sites_path / site / "site_config.json"
	config.write_text(json.dumps({**json.loads(config.read_text()), "btu_allow_any_app_function": 1}))
	wait_until(
		lambda: jobs_of(r, {names["undeclared"]}),
		30,
		f"the site's escape hatch lets the undeclared function fire\n{scheduler.tail()}",
	)
	reasons = invalid(r, site)
	assert [case for case in cases if names[case] not in reasons] == ["undeclared"]
	assert jobs_of(r, {names[case] for case in cases if case != "undeclared"}) == []
