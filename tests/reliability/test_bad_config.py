"""Malformed configuration at start, through the real `python -m btu.scheduler_daemon run`.

Bad input that stops the whole scheduler exits 2 at once with one line naming
the file (or variable, or flag), the key and the fix, never a traceback. A
site's unreadable site_config.json costs that site only: it is named in the
log, the other sites are served, and it is served once the file is fixed.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time

import pytest

from btu.scheduler_daemon.log import text_value
from btu.scheduler_daemon.store.jobs import parse_job_id
from btu.shared import protocol
from devbench.data import SiteData
from tests.engine.helpers import (
	ONE_SECOND,
	REPO,
	child_env,
	queue_ids,
	queue_key,
	slots_by_schedule,
	status_json,
	wait_until,
)
from tests.reliability.helpers import site_job_ids
from tests.support.keys import KEYS
from tests.support.slack import patient

RUN = [sys.executable, "-m", "btu.scheduler_daemon", "run"]
TOML = "btu_scheduler.toml"
COMMON = "sites/common_site_config.json"

# (id, files written under tmp_path, environment, arguments after `run`, words the message must hold).
# "{tmp}" is tmp_path; every case passes --config and --bench, so nothing outside tmp_path is read.
CASES = [
	(
		"toml-syntax-error",
		{TOML: 'log_level = "DEBUG\n'},
		{},
		[],
		[f"{{tmp}}/{TOML}", "is not valid TOML", "line 1", "fix the file"],
	),
	(
		"toml-unknown-key",
		{TOML: "lease_ttl = 5\n"},
		{},
		[],
		["unknown configuration key 'lease_ttl'", f"file {{tmp}}/{TOML}", "did you mean lease_ttl_secs", "known keys:"],
	),
	(
		"toml-section-header",
		{TOML: "[btu_scheduler]\nbatch_size = 5\n"},
		{},
		[],
		["'btu_scheduler'", "takes its keys at the top level", "remove the [btu_scheduler] line"],
	),
	(
		"toml-wrong-type",
		{TOML: 'lease_ttl_secs = "5"\n'},
		{},
		[],
		["lease_ttl_secs = '5'", f"file {{tmp}}/{TOML}", "a str is not a number", "a number from 0.1 to 3600"],
	),
	(
		"toml-out-of-range",
		{TOML: "batch_size = 0\n"},
		{},
		[],
		["batch_size = 0", f"file {{tmp}}/{TOML}", "out of range", "an integer from 1 to 100000"],
	),
	(
		"env-not-a-number",
		{},
		{"BTU_SCHEDULER_LEASE_TTL_SECS": "abc"},
		[],
		["lease_ttl_secs = 'abc'", "env BTU_SCHEDULER_LEASE_TTL_SECS", "not a number", "from 0.1 to 3600"],
	),
	(
		"env-unknown-key",
		{},
		{"BTU_SCHEDULER_LEASE_TTL": "5"},
		[],
		["unknown configuration key 'LEASE_TTL'", "env BTU_SCHEDULER_LEASE_TTL", "did you mean lease_ttl_secs"],
	),
	(
		"flag-unknown-value",
		{},
		{},
		["--executor", "celery"],
		["executor = 'celery'", "flag --executor", "one of frappe, rq"],
	),
	(
		"bench-missing",
		{},
		{},
		["--bench", "{tmp}/no-such-bench"],
		["{tmp}/no-such-bench does not exist", "--bench DIR"],
	),
	(
		"bench-not-a-bench",
		{"README": "not a bench\n"},
		{},
		["--bench", "{tmp}"],
		["{tmp} has no sites/ directory", "--bench DIR"],
	),
	(
		"common-config-not-json",
		{COMMON: '{"redis_queue": "redis://127.0.0.1:11000",}'},
		{},
		[],
		[f"{{tmp}}/{COMMON}: not valid JSON", "line 1", "fix the file"],
	),
	(
		"common-config-array",
		{COMMON: "[]"},
		{},
		[],
		[f"{{tmp}}/{COMMON}: must hold a JSON object, found an array", "fix the file"],
	),
	(
		"common-config-redis-queue-no-scheme",
		{COMMON: '{"redis_queue": "127.0.0.1:11000"}'},
		{},
		[],
		[f"{{tmp}}/{COMMON}: redis_queue = '127.0.0.1:11000'", "is not a Redis URL", "redis://HOST:PORT"],
	),
	(
		"common-config-redis-queue-number",
		{COMMON: '{"redis_queue": 11000}'},
		{},
		[],
		[f"{{tmp}}/{COMMON}: redis_queue = 11000", "redis://HOST:PORT"],
	),
	(
		"env-frappe-redis-queue",
		{COMMON: "{}"},
		{"FRAPPE_REDIS_QUEUE": "localhost"},
		[],
		["environment variable FRAPPE_REDIS_QUEUE = 'localhost'", "is not a Redis URL"],
	),
	(
		"common-config-workers-timeout",
		{COMMON: '{"workers": {"long_running": {"timeout": "8000s"}}}'},
		{},
		[],
		[f"{{tmp}}/{COMMON}: workers.long_running.timeout = '8000s'", "whole number of seconds", "fix the file"],
	),
	(
		"common-config-workers-array",
		{COMMON: '{"workers": ["long_running"]}'},
		{},
		[],
		[f"{{tmp}}/{COMMON}: workers must be an object", '{"long": {"timeout": 1500}}', "found an array"],
	),
	(
		"sentinel-list-missing",
		{COMMON: '{"redis_queue_sentinel_enabled": 1, "redis_queue_master_service": "m"}'},
		{},
		[],
		[
			f"{{tmp}}/{COMMON}: redis_queue_sentinels must be a list",
			'"10.0.0.1:26379"',
			"turn redis_queue_sentinel_enabled off",
		],
	),
	(
		"sentinel-node-no-port",
		{
			COMMON: '{"redis_queue_sentinel_enabled": true, "redis_queue_sentinels": ["10.0.0.1"], '
			'"redis_queue_master_service": "m"}'
		},
		{},
		[],
		["redis_queue_sentinels entry '10.0.0.1' is not \"host:port\"", "fix the file"],
	),
	(
		"sentinel-port-out-of-range",
		{
			COMMON: '{"redis_queue_sentinel_enabled": 1, "redis_queue_sentinels": ["h:26379", "h:99999"], '
			'"redis_queue_master_service": "m"}'
		},
		{},
		[],
		["entry 'h:99999'", "port 1-65535"],
	),
	(
		"sentinel-service-missing",
		{COMMON: '{"redis_queue_sentinel_enabled": 1, "redis_queue_sentinels": ["h:26379"]}'},
		{},
		[],
		["redis_queue_master_service must name the master's service", "sentinel monitor NAME", "found None"],
	),
	(
		"sentinel-password-number",
		{
			COMMON: '{"redis_queue_sentinel_enabled": 1, "redis_queue_sentinels": ["h:26379"], '
			'"redis_queue_master_service": "m", "redis_queue_sentinel_password": 123}'
		},
		{},
		[],
		["redis_queue_sentinel_password must be text, found a number"],
	),
]


@pytest.mark.parametrize("case, files, env, args, words", CASES, ids=[case[0] for case in CASES])
def test_bad_configuration_exits_2_naming_it(tmp_path, case, files, env, args, words):
	for name, content in files.items():
		(tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
		(tmp_path / name).write_text(content)
	argv = [arg.replace("{tmp}", str(tmp_path)) for arg in args]
	if "--bench" not in argv:
		argv += ["--bench", str(tmp_path)]
	command = [*RUN, "--config", str(tmp_path / TOML), *argv]
	done = subprocess.run(
		command, capture_output=True, text=True, cwd=REPO, env={**child_env(), **env}, timeout=patient(30)
	)
	assert done.returncode == 2, f"{case}: exit {done.returncode}\n{done.stderr}"
	assert done.stdout == ""
	assert "Traceback" not in done.stderr, done.stderr
	lines = done.stderr.splitlines()
	assert len(lines) == 1 and lines[0].startswith("btu-scheduler run: "), done.stderr
	for word in words:
		assert word.replace("{tmp}", str(tmp_path)) in done.stderr, (word, done.stderr)


def fired_sites(r, bench) -> set[str]:
	"""The sites with a job on the bench's default queue."""
	return {site for site in bench.site_names() if site_job_ids(r, bench, site)}


def test_unreadable_site_configs_cost_only_their_sites(engine_bench, processes, r, tmp_path):
	"""site1 has a db_port typo, site2 a site_config.json that is not JSON; site3 is fine and sorts last."""
	bench, _ = engine_bench("site1.localhost", "site2.localhost", "site3.localhost")
	for site in bench.site_names():
		with SiteData(bench, site) as data:
			task = data.insert_task(function_string="tests.engine.tasks.record", arguments={"key": "test:runs"})
			data.insert_schedule(task, run_frequency="Cron Style", cron_string=ONE_SECOND)
	configs = {site: bench.path / "sites" / site / "site_config.json" for site in bench.site_names()}
	originals = {site: path.read_text() for site, path in configs.items()}
	missing_toml = tmp_path / "btu_scheduler.toml"  # named but absent: a typo'd --config must not go unnoticed
	try:
		configs["site1.localhost"].write_text(
			json.dumps({**json.loads(originals["site1.localhost"]), "db_port": "33O6"})
		)
		configs["site2.localhost"].write_text(originals["site2.localhost"].replace('"db_name"', "db_name", 1))
		scheduler = processes.scheduler(bench.path, "--full-refresh-interval-secs", "1", "--config", str(missing_toml))
		wait_until(lambda: "site3.localhost" in fired_sites(r, bench), 30, "site3 fires")
		time.sleep(1.5)  # more full reconciles over the bad files
		log = scheduler.log()
		assert scheduler.alive()
		assert fired_sites(r, bench) == {"site3.localhost"}
		assert " ERROR site_unreadable site=site1.localhost " in log
		assert f"db_port = '33O6' in {configs['site1.localhost']} is not a port number" in log
		assert "give an integer from 1 to 65535" in log
		assert " ERROR site_unreadable site=site2.localhost " in log
		assert f"{configs['site2.localhost']}: not valid JSON" in log and "fix the file" in log
		assert " reconcile_failed " not in log and "Traceback" not in log
		assert f' WARNING config_file_missing path={missing_toml} named_by="flag --config" ' in log
		for site, text in originals.items():
			configs[site].write_text(text)
		wait_until(lambda: fired_sites(r, bench) == set(configs), 15, "every site fires once its file is fixed")
		assert scheduler.alive()
	finally:
		for site, text in originals.items():
			configs[site].write_text(text)


def test_site_config_broken_while_running_keeps_the_site(engine_bench, processes, r):
	bench, data = engine_bench()
	site = data.site.name
	task = data.insert_task(function_string="tests.engine.tasks.record", arguments={"key": "test:runs"})
	schedule = data.insert_schedule(
		task, run_frequency="Cron Style", cron_string=ONE_SECOND, catch_up_policy="fire_all", catch_up_max=100
	)
	path = bench.path / "sites" / site / "site_config.json"
	original = path.read_text()
	scheduler = processes.scheduler(bench.path, "--full-refresh-interval-secs", "1")
	try:
		wait_until(lambda: len(queue_ids(r, queue_key(bench))) >= 2, 30, "a first fire")
		path.write_text(original[:-5])  # as an editor or a crash mid-write leaves it
		time.sleep(2.5)
		path.write_text(original)
		time.sleep(2)
	finally:
		path.write_text(original)
	assert scheduler.alive()
	slots = sorted(slots_by_schedule(queue_ids(r, queue_key(bench)))[schedule])
	holes = [(a, b) for a, b in zip(slots, slots[1:]) if b - a != 1000]
	assert holes == [], f"slots lost while site_config.json was unreadable: {holes}"
	assert " site_dropped " not in scheduler.log()


def test_site_names_holding_separators_are_refused(engine_bench, processes, r):
	"""Sites named with "|", ":" or a tab, each pointing at a working BTU database, are refused by name, once each."""
	bench, data = engine_bench("ok.localhost")
	task = data.insert_task(function_string="tests.engine.tasks.record", arguments={"key": "test:runs"})
	schedule = data.insert_schedule(task, run_frequency="Cron Style", cron_string=ONE_SECOND)
	config = (bench.path / "sites" / "ok.localhost" / "site_config.json").read_text()
	refused = {
		"ok|x.localhost": "'|'",
		"ok:x.localhost": "':'",
		"a:b|c": "'|' and ':'",
		"ok\tx.localhost": "control characters",
	}
	for name in refused:
		(bench.path / "sites" / name).mkdir()
		(bench.path / "sites" / name / "site_config.json").write_text(config)  # the same database: it would fire
	scheduler = processes.scheduler(bench.path, "--full-refresh-interval-secs", "1")
	wait_until(lambda: site_job_ids(r, bench, "ok.localhost"), 30, "ok.localhost fires")
	time.sleep(2.5)  # more full reconciles over the same sites
	reply = protocol.call(r, KEYS, protocol.CREATE_TASK_SCHEDULE, schedule, site="ok|x.localhost")
	log = scheduler.log()
	assert scheduler.alive()
	assert {parse_job_id(i)[0] for i in queue_ids(r, queue_key(bench))} == {"ok.localhost"}
	health = status_json(bench.path)["sites"]
	for name, held in refused.items():
		assert log.count(f" ERROR site_refused site={text_value(name)} ") == 1, name
		assert f"the name holds {held}" in health[name]["site_config"]
		assert "use a site name without '|', ':' or control characters" in health[name]["site_config"]
	assert not reply.ok and "site 'ok|x.localhost': the name holds '|'" in reply.message
	assert "Traceback" not in log
