"""Configuration: flag > BTU_SCHEDULER_<KEY> > TOML file > default, and clear refusals."""

from __future__ import annotations

import argparse
import dataclasses

import pytest

from btu.scheduler_daemon.operations.config import (
	DEFAULT_CONFIG_PATH,
	SETTINGS,
	Config,
	ConfigError,
	add_config_flags,
	load_config,
	mask_url,
)

pytestmark = pytest.mark.versions


def parse(*argv: str) -> argparse.Namespace:
	parser = argparse.ArgumentParser()
	add_config_flags(parser)
	return parser.parse_args(list(argv))


def test_refresh_interval_grows_with_sites_unless_set(tmp_path):
	no_file = ("--config", str(tmp_path / "missing.toml"))
	assert Config().refresh_interval(100) == 60, "a bench of up to 200 sites: each site read once a minute"
	assert Config().refresh_interval(1000) == 300, (
		"1,000 sites by default: each read every 5 minutes (0.3 s a site), edits come by RPC"
	)
	assert load_config(parse(*no_file, "--full-refresh-secs-per-site", "0"), environ={}).refresh_interval(1000) == 60
	set_interval = load_config(parse(*no_file, "--full-refresh-interval-secs", "1"), environ={})
	assert set_interval.refresh_interval(1000) == 1, (
		"an interval the operator set is kept, whatever the number of sites"
	)
	from_env = load_config(parse(*no_file), environ={"BTU_SCHEDULER_FULL_REFRESH_INTERVAL_SECS": "90"})
	assert from_env.refresh_interval(1000) == 90


@pytest.fixture
def toml(tmp_path):
	def write(text: str) -> str:
		path = tmp_path / "btu_scheduler.toml"
		path.write_text(text)
		return str(path)

	return write


def test_defaults_with_no_file(tmp_path):
	config = load_config(parse("--config", str(tmp_path / "missing.toml")), environ={})
	assert (
		config.values()
		== Config().values()
		== {
			"disable_redis_rpc": False,
			"full_refresh_interval_secs": 60,
			"full_refresh_secs_per_site": 0.3,
			"lease_ttl_secs": 5.0,
			"misfire_grace_secs": 10.0,
			"prepare_ahead_secs": 2.0,
			"db_max_connections": 4,
			"db_idle_secs": 60.0,
			"batch_size": 500,
			"release_batch_size": 10000,
			"replica_acks": 1,
			"replica_ack_timeout_ms": 500,
			"log_level": "INFO",
			"log_format": "text",
			"executor": "frappe",
			"redis_url": None,
			"bench": None,
			"metrics_port": None,
			"metrics_address": "127.0.0.1",
			"metrics_schedules": (),
			"metrics_bearer_token": None,
			"metrics_allow_unauthenticated": False,
		}
	)
	assert set(config.sources.values()) == {"default"}
	assert config.config_file_found is False
	assert dataclasses.is_dataclass(config)
	with pytest.raises(dataclasses.FrozenInstanceError):
		config.batch_size = 1


def test_default_path_and_env_path(toml):
	assert load_config(parse(), environ={}).config_file == DEFAULT_CONFIG_PATH
	path = toml("batch_size = 7\n")
	config = load_config(parse(), environ={"BTU_SCHEDULER_CONFIG": path})
	assert config.config_file == path and config.config_file_found
	assert config.batch_size == 7 and config.sources["batch_size"] == f"file {path}"
	# --config wins over the environment.
	assert load_config(parse("--config", "/nonexistent.toml"), environ={"BTU_SCHEDULER_CONFIG": path}).batch_size == 500


def test_precedence_flag_over_env_over_file_over_default(toml):
	path = toml('log_level = "WARNING"\nbatch_size = 100\nexecutor = "rq"\ndisable_redis_rpc = true\n')
	env = {"BTU_SCHEDULER_BATCH_SIZE": "200", "BTU_SCHEDULER_EXECUTOR": "frappe", "BTU_SCHEDULER_LEASE_TTL_SECS": "2.5"}
	config = load_config(parse("--config", path, "--batch-size", "300", "--disable-redis-rpc", "false"), environ=env)
	assert config.batch_size == 300 and config.sources["batch_size"] == "flag --batch-size"
	assert config.executor == "frappe" and config.sources["executor"] == "env BTU_SCHEDULER_EXECUTOR"
	assert config.lease_ttl_secs == 2.5 and config.sources["lease_ttl_secs"] == "env BTU_SCHEDULER_LEASE_TTL_SECS"
	assert config.log_level == "WARNING" and config.sources["log_level"] == f"file {path}"
	assert config.disable_redis_rpc is False and config.sources["disable_redis_rpc"] == "flag --disable-redis-rpc"
	assert config.misfire_grace_secs == 10.0 and config.sources["misfire_grace_secs"] == "default"


def test_every_key_has_env_and_flag(tmp_path):
	values = {
		"disable_redis_rpc": ("true", True),
		"full_refresh_interval_secs": ("30", 30),
		"full_refresh_secs_per_site": ("0", 0.0),
		"lease_ttl_secs": ("1.5", 1.5),
		"misfire_grace_secs": ("0", 0.0),
		"prepare_ahead_secs": ("0.5", 0.5),
		"db_max_connections": ("1", 1),
		"db_idle_secs": ("2.5", 2.5),
		"batch_size": ("10", 10),
		"release_batch_size": ("2000", 2000),
		"replica_acks": ("0", 0),
		"replica_ack_timeout_ms": ("50", 50),
		"log_level": ("debug", "DEBUG"),
		"log_format": ("JSON", "json"),
		"executor": ("rq", "rq"),
		"redis_url": ("redis://h:1/2", "redis://h:1/2"),
		"bench": (str(tmp_path), str(tmp_path)),
		"metrics_port": ("9464", 9464),
		"metrics_address": ("::1", "::1"),
		"metrics_schedules": ("TS-000001, TS-000002,,TS-000001", ("TS-000001", "TS-000002")),
		"metrics_bearer_token": ("t0ken", "t0ken"),
		"metrics_allow_unauthenticated": ("yes", True),
	}
	assert set(values) == {setting.key for setting in SETTINGS}
	missing = ["--config", str(tmp_path / "none.toml")]
	for key, (text, expected) in values.items():
		from_env = load_config(parse(*missing), environ={f"BTU_SCHEDULER_{key.upper()}": text})
		assert getattr(from_env, key) == expected and from_env.sources[key] == f"env BTU_SCHEDULER_{key.upper()}"
		flag = "--" + key.replace("_", "-")
		from_flag = load_config(parse(*missing, flag, text), environ={})
		assert getattr(from_flag, key) == expected and from_flag.sources[key] == f"flag {flag}"


def test_bare_boolean_flag_means_true(tmp_path):
	config = load_config(parse("--config", str(tmp_path / "x.toml"), "--disable-redis-rpc"), environ={})
	assert config.disable_redis_rpc is True


def test_empty_environment_variable_counts_as_unset(tmp_path):
	config = load_config(parse("--config", str(tmp_path / "x.toml")), environ={"BTU_SCHEDULER_LOG_LEVEL": ""})
	assert config.log_level == "INFO" and config.sources["log_level"] == "default"


def test_unknown_key_in_file_is_refused(toml):
	path = toml('log_levle = "DEBUG"\n')
	with pytest.raises(ConfigError) as error:
		load_config(parse("--config", path), environ={})
	message = str(error.value)
	assert "'log_levle'" in message and f"file {path}" in message
	assert "did you mean log_level" in message and "known keys: disable_redis_rpc" in message


def test_unknown_environment_key_is_refused(tmp_path):
	with pytest.raises(
		ConfigError, match=r"unknown configuration key 'BATCHSIZE' \(from env BTU_SCHEDULER_BATCHSIZE\)"
	):
		load_config(parse("--config", str(tmp_path / "x.toml")), environ={"BTU_SCHEDULER_BATCHSIZE": "5"})


@pytest.mark.parametrize(
	"text, words",
	[
		('batch_size = "many"', ["batch_size = 'many'", "a str is not an integer", "an integer from 1 to 100000"]),
		("batch_size = 0", ["batch_size = 0", "out of range", "from 1 to 100000"]),
		("batch_size = 2.5", ["batch_size = 2.5", "not an integer"]),
		("batch_size = true", ["batch_size = True", "a boolean is not a number"]),
		("lease_ttl_secs = 0", ["lease_ttl_secs = 0", "out of range", "from 0.1 to 3600"]),
		("lease_ttl_secs = nan", ["lease_ttl_secs = nan", "finite"]),
		("misfire_grace_secs = -1", ["misfire_grace_secs = -1", "out of range"]),
		('disable_redis_rpc = "yes"', ["disable_redis_rpc = 'yes'", "not a boolean", "true or false"]),
		('log_format = "xml"', ["log_format = 'xml'", "unknown value", "one of text, json"]),
		('log_level = "LOUD"', ["log_level = 'LOUD'", "one of DEBUG, INFO, WARNING, ERROR, CRITICAL"]),
		('executor = "celery"', ["executor = 'celery'", "one of frappe, rq"]),
		('redis_url = "http://u:pw@h/0"', ["redis_url = 'http://u:***@h/0'", "not a Redis URL"]),
		("redis_url = 6379", ["redis_url = 6379", "not a string"]),
		('bench = ""', ["bench = ''", "empty"]),
		("[scheduler]\nbatch_size = 5", ["unknown configuration key 'scheduler'"]),
		("metrics_port = 65536", ["metrics_port = 65536", "out of range", "from 0 to 65535"]),
		("metrics_port = -1", ["metrics_port = -1", "out of range"]),
		('metrics_port = "9100"', ["metrics_port = '9100'", "a str is not an integer"]),
		('metrics_address = "999.1.1.1"', ["metrics_address = '999.1.1.1'", "neither an IP address nor a host name"]),
		(
			'metrics_address = "http://0.0.0.0"',
			["neither an IP address nor a host name", "such as 127.0.0.1, 0.0.0.0 or ::1"],
		),
		('metrics_address = ""', ["metrics_address = ''", "empty"]),
		("metrics_schedules = [1, 2]", ["metrics_schedules = [1, 2]", "not a list of strings"]),
		('metrics_schedules = ["TS-1\\nx"]', ["is not a schedule name", "printable"]),
		(
			"metrics_schedules = [" + ", ".join(f'"TS-{n}"' for n in range(101)) + "]",
			["101 names", "up to 100 schedule names"],
		),
	],
)
def test_bad_value_in_file_names_key_value_source_and_allowed(toml, text, words):
	path = toml(text + "\n")
	with pytest.raises(ConfigError) as error:
		load_config(parse("--config", path), environ={})
	message = str(error.value)
	for word in words:
		assert word in message, (word, message)
	assert f"file {path}" in message
	assert "pw" not in message


@pytest.mark.parametrize(
	"env, flag, words",
	[
		(
			("BTU_SCHEDULER_BATCH_SIZE", "lots"),
			None,
			["batch_size = 'lots'", "env BTU_SCHEDULER_BATCH_SIZE", "not an integer"],
		),
		(("BTU_SCHEDULER_DISABLE_REDIS_RPC", "maybe"), None, ["disable_redis_rpc = 'maybe'", "true or false"]),
		(("BTU_SCHEDULER_LEASE_TTL_SECS", "inf"), None, ["lease_ttl_secs = 'inf'", "finite"]),
		(None, ("--log-format", "yaml"), ["log_format = 'yaml'", "flag --log-format", "one of text, json"]),
		(
			None,
			("--full-refresh-interval-secs", "0"),
			[
				"full_refresh_interval_secs = '0'",
				"flag --full-refresh-interval-secs",
				"out of range",
				"from 1 to 86400",
			],
		),
		(None, ("--redis-url", "127.0.0.1:6379"), ["redis_url = '127.0.0.1:6379'", "redis://"]),
	],
)
def test_bad_value_from_env_or_flag(tmp_path, env, flag, words):
	argv = ["--config", str(tmp_path / "x.toml"), *(flag or ())]
	with pytest.raises(ConfigError) as error:
		load_config(parse(*argv), environ=dict([env]) if env else {})
	for word in words:
		assert word in str(error.value), (word, str(error.value))


def test_bad_value_in_file_is_refused_even_when_a_flag_overrides_it(toml):
	path = toml('log_format = "xml"\n')
	with pytest.raises(ConfigError, match="log_format"):
		load_config(parse("--config", path, "--log-format", "json"), environ={})


@pytest.mark.parametrize(
	"text, words",
	[("batch_size = ", ["not valid TOML", "fix the file"]), ("\xff", ["not UTF-8", "fix the file"])],
)
def test_broken_file_is_refused(tmp_path, text, words):
	path = tmp_path / "bad.toml"
	path.write_bytes(text.encode("latin-1"))
	with pytest.raises(ConfigError) as error:
		load_config(parse("--config", str(path)), environ={})
	assert str(path) in str(error.value)
	for word in words:
		assert word in str(error.value)


def test_directory_as_file_is_refused(tmp_path):
	with pytest.raises(ConfigError, match="is a directory"):
		load_config(parse("--config", str(tmp_path)), environ={})


@pytest.mark.parametrize(
	"url, shown",
	[
		("redis://:secret@127.0.0.1:11311/0", "redis://:***@127.0.0.1:11311/0"),
		("redis://default:secret@h:1", "redis://default:***@h:1"),
		("rediss://user:p%40ss@h:1/2?ssl_cert_reqs=none", "rediss://user:***@h:1/2?ssl_cert_reqs=none"),
		("redis://h:1/0?password=secret&db=1", "redis://h:1/0?password=***&db=1"),
		("redis://127.0.0.1:11311", "redis://127.0.0.1:11311"),
		("unix:///run/redis.sock?password=secret", "unix:///run/redis.sock?password=***"),
	],
)
def test_secrets_are_masked(url, shown):
	assert mask_url(url) == shown
	config = load_config(parse("--config", "/nonexistent.toml", "--redis-url", url), environ={})
	assert config.redis_url == url
	assert config.masked_values()["redis_url"] == shown
	if "secret" in url:
		assert "secret" not in repr(config)


def test_masking_leaves_a_value_without_password_as_typed():
	assert mask_url("127.0.0.1:6379") == "127.0.0.1:6379"
	assert mask_url("u:pw@h:1") == "u:***@h:1"
