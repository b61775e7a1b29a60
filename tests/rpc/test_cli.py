"""`btu-scheduler ping` and `btu-scheduler config`, run as the user runs them."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from btu.scheduler_daemon.operations.config import SETTINGS
from btu.shared import protocol
from tests.support.slack import patient

pytestmark = pytest.mark.versions

ACK = {"status": "ok", "request_type": "ping", "message": "Command received by BTU Scheduler."}
ENTRY_POINT = Path(sys.executable).parent / "btu-scheduler"


@pytest.fixture
def cli(tmp_path):
	"""Run btu-scheduler from an empty directory, with no configuration file and no BTU_SCHEDULER_* variables."""
	base_env = {key: value for key, value in os.environ.items() if not key.startswith("BTU_SCHEDULER_")}
	base_env["BTU_SCHEDULER_CONFIG"] = str(tmp_path / "absent.toml")
	command = [str(ENTRY_POINT)] if ENTRY_POINT.exists() else [sys.executable, "-m", "btu.scheduler_daemon"]

	def run(*argv: str, env: dict | None = None, cwd: Path | None = None) -> subprocess.CompletedProcess:
		return subprocess.run(
			[*command, *argv],
			capture_output=True,
			text=True,
			timeout=patient(60),
			env={**base_env, **(env or {})},
			cwd=cwd or tmp_path,
		)

	return run


def make_bench_dir(path: Path, redis_url: str) -> Path:
	"""The directory layout of a bench (no sites needed for a ping)."""
	for folder in ("apps", "config", "env", "sites"):
		(path / folder).mkdir(parents=True)
	(path / "Procfile").write_text("")
	(path / "sites" / "common_site_config.json").write_text(json.dumps({"redis_queue": redis_url}))
	return path


def test_ping_prints_the_ack_and_round_trip(cli, listener, redis_url):
	result = cli("ping", "--redis-url", redis_url)
	assert result.returncode == 0, result.stderr
	lines = result.stdout.splitlines()
	assert json.loads(lines[0]) == ACK
	assert re.fullmatch(r"round trip: \d+\.\d\d ms", lines[1])


def test_ping_with_site_and_through_the_bench_redis_queue(cli, listener, redis_url, tmp_path):
	bench = make_bench_dir(tmp_path / "bench", redis_url)
	assert cli("ping", "--bench", str(bench), "--site", "site2.localhost").returncode == 0
	# Found from the current directory, as bench does.
	result = cli("ping", cwd=bench / "sites")
	assert result.returncode == 0, result.stderr
	assert json.loads(result.stdout.splitlines()[0]) == ACK


def test_ping_without_a_scheduler_exits_1_with_the_hint(cli, r, redis_url):
	result = cli("ping", "--redis-url", redis_url)
	assert result.returncode == 1
	assert result.stdout == ""
	assert protocol.UNREACHABLE_MESSAGE in result.stderr
	assert "no answer after 5" in result.stderr


def test_ping_with_redis_down_exits_1(cli):
	from tests.support.ports import claim_port

	result = cli("ping", "--redis-url", f"redis://:hunter2@127.0.0.1:{claim_port()}/0")
	assert result.returncode == 1
	assert "is not answering" in result.stderr and "hunter2" not in result.stderr


@pytest.mark.parametrize(
	"argv, env, words",
	[
		(["--log-format", "xml"], {}, ["log_format = 'xml'", "flag --log-format", "one of text, json"]),
		([], {"BTU_SCHEDULER_BATCH_SIZE": "0"}, ["batch_size = '0'", "env BTU_SCHEDULER_BATCH_SIZE", "out of range"]),
		([], {}, ["no Frappe bench contains", "pass --bench DIR"]),
	],
)
def test_ping_bad_input_exits_2(cli, argv, env, words):
	result = cli("ping", *argv, env=env)
	assert result.returncode == 2
	for word in words:
		assert word in result.stderr


def test_config_prints_each_key_with_its_source(cli, tmp_path):
	config_file = tmp_path / "btu.toml"
	config_file.write_text('log_level = "debug"\nbatch_size = 250\nmetrics_bearer_token = "tok-hidden"\n')
	result = cli(
		"config",
		"--config",
		str(config_file),
		"--lease-ttl-secs",
		"3",
		env={"BTU_SCHEDULER_REDIS_URL": "redis://default:s3cret@10.0.0.5:11311/0", "BTU_SCHEDULER_BATCH_SIZE": "50"},
	)
	assert result.returncode == 0, result.stderr
	out = result.stdout
	assert "s3cret" not in out and "tok-hidden" not in out
	rows = {line.split()[0]: line for line in out.splitlines() if not line.startswith("#")}
	assert rows.keys() == {
		"disable_redis_rpc",
		"full_refresh_interval_secs",
		"full_refresh_secs_per_site",
		"lease_ttl_secs",
		"misfire_grace_secs",
		"prepare_ahead_secs",
		"db_max_connections",
		"db_idle_secs",
		"batch_size",
		"release_batch_size",
		"replica_acks",
		"replica_ack_timeout_ms",
		"log_level",
		"log_format",
		"executor",
		"redis_url",
		"metrics_address",
		"metrics_schedules",
		"metrics_bearer_token",
		"metrics_allow_unauthenticated",
	}
	assert re.fullmatch(
		r'redis_url = "redis://default:\*\*\*@10\.0\.0\.5:11311/0"\s+# env BTU_SCHEDULER_REDIS_URL', rows["redis_url"]
	)
	assert re.fullmatch(r"batch_size = 50\s+# env BTU_SCHEDULER_BATCH_SIZE", rows["batch_size"])
	assert re.fullmatch(
		rf'metrics_bearer_token = "\*\*\*"\s+# file {re.escape(str(config_file))}', rows["metrics_bearer_token"]
	)
	assert re.fullmatch(rf'log_level = "DEBUG"\s+# file {re.escape(str(config_file))}', rows["log_level"])
	assert re.fullmatch(r"lease_ttl_secs = 3.0\s+# flag --lease-ttl-secs", rows["lease_ttl_secs"])
	assert re.fullmatch(r"executor = \"frappe\"\s+# default", rows["executor"])
	assert re.search(r"^# bench is not set\s+# default$", out, re.M)
	assert out.startswith(f"# configuration file: {config_file} (loaded)")


def test_config_json(cli):
	result = cli("config", "--json", "--redis-url", "redis://:pw@h:1/0", "--disable-redis-rpc")
	assert result.returncode == 0, result.stderr
	data = json.loads(result.stdout)
	assert data["config_file_found"] is False
	assert data["settings"]["redis_url"] == {"value": "redis://:***@h:1/0", "source": "flag --redis-url"}
	assert data["settings"]["disable_redis_rpc"] == {"value": True, "source": "flag --disable-redis-rpc"}
	assert data["settings"]["bench"] == {"value": None, "source": "default"}
	assert len(data["settings"]) == len(SETTINGS)


def test_config_refuses_unknown_key_with_exit_2(cli, tmp_path):
	config_file = tmp_path / "btu.toml"
	config_file.write_text("batchsize = 5\n")
	result = cli("config", "--config", str(config_file))
	assert result.returncode == 2 and result.stdout == ""
	assert "unknown configuration key 'batchsize'" in result.stderr and "did you mean batch_size" in result.stderr


@pytest.mark.parametrize("command", ["ping", "config"])
def test_help(cli, command):
	result = cli(command, "--help")
	assert result.returncode == 0
	assert "--redis-url" in result.stdout and "--bench DIR" in result.stdout and "--config PATH" in result.stdout
