"""The scheduler's configuration: defaults, a TOML file, the environment and flags.

Precedence, highest first: a command-line flag ``--<key-with-dashes>``, the
environment variable ``BTU_SCHEDULER_<KEY>``, the TOML file
(``/etc/btu_scheduler/btu_scheduler.toml``, or ``--config`` /
``BTU_SCHEDULER_CONFIG``), the default. A missing file is fine; an unknown key
or a bad value is refused with a `ConfigError` naming the key, the value,
where it came from and what is allowed.
"""

from __future__ import annotations

import argparse
import difflib
import ipaddress
import math
import os
import re
import sys
from dataclasses import dataclass, field
from typing import Any

from btu.shared.job_contract import EXECUTORS, FRAPPE_EXECUTOR
from btu.shared.redis_urls import REDIS_URL_SCHEMES, is_redis_url, mask_url

if sys.version_info >= (3, 11):
	import tomllib
else:
	import tomli as tomllib

DEFAULT_CONFIG_PATH = "/etc/btu_scheduler/btu_scheduler.toml"
CONFIG_PATH_ENV = "BTU_SCHEDULER_CONFIG"
ENV_PREFIX = "BTU_SCHEDULER_"
LOG_LEVELS = ("DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL")
LOG_FORMATS = ("text", "json")
SECRET_KEYS = frozenset({"redis_url"})
# Secrets that are no URL: shown as MASK whole.
TOKEN_KEYS = frozenset({"metrics_bearer_token"})
MASK = "***"
# Each name in metrics_schedules is a series set of its own: a short list, or the cardinality is the operator's to
# regret.
MAX_METRICS_SCHEDULES = 100
HOSTNAME = re.compile(
	r"^(?=.{1,253}$)[A-Za-z0-9]([A-Za-z0-9-]{0,61}[A-Za-z0-9])?(\.[A-Za-z0-9]([A-Za-z0-9-]{0,61}[A-Za-z0-9])?)*$"
)


class ConfigError(Exception):
	"""A configuration that cannot be used; the message names the key, value, source and fix."""


@dataclass(frozen=True)
class Setting:
	"""One configuration key: its default and how a value is checked."""

	key: str
	default: Any
	kind: str  # bool, int, float, choice, str, url, address (IP or host name), names (a list, or text split at commas)
	help: str
	minimum: float | None = None
	maximum: float | None = None
	choices: tuple[str, ...] = ()

	@property
	def env(self) -> str:
		return ENV_PREFIX + self.key.upper()

	@property
	def flag(self) -> str:
		return "--" + self.key.replace("_", "-")

	@property
	def allowed(self) -> str:
		if self.kind == "bool":
			return "true or false"
		if self.kind == "choice":
			return "one of " + ", ".join(self.choices)
		if self.kind in ("int", "float"):
			noun = "an integer" if self.kind == "int" else "a number"
			return f"{noun} from {format_number(self.minimum)} to {format_number(self.maximum)}"
		if self.kind == "url":
			return "a Redis URL such as redis://127.0.0.1:11311/0 (schemes " + ", ".join(REDIS_URL_SCHEMES) + ")"
		if self.kind == "address":
			return "an IP address such as 127.0.0.1, 0.0.0.0 or ::1, or a host name"
		if self.kind == "names":
			return (
				f"up to {MAX_METRICS_SCHEDULES} schedule names (TS-000001), as a TOML list or text separated by commas"
			)
		return "a non-empty string"


SETTINGS: tuple[Setting, ...] = (
	Setting("disable_redis_rpc", False, "bool", "do not start the Redis RPC listener (debugging only)"),
	Setting(
		"full_refresh_interval_secs",
		60,
		"int",
		"seconds between full re-reads of every site's schedules",
		minimum=1,
		maximum=86400,
	),
	Setting(
		"full_refresh_secs_per_site",
		0.3,
		"float",
		"while full_refresh_interval_secs is not set: seconds a site of a full re-read, "
		"when longer than its default (many sites)",
		minimum=0,
		maximum=3600,
	),
	Setting(
		"lease_ttl_secs", 5.0, "float", "seconds the leader lease lives without renewal", minimum=0.1, maximum=3600
	),
	Setting(
		"misfire_grace_secs",
		10.0,
		"float",
		"how late a slot may still fire after its moment",
		minimum=0,
		maximum=86400,
	),
	Setting(
		"prepare_ahead_secs",
		2.0,
		"float",
		"seconds before its moment a fire's job is written, to be queued at the moment",
		minimum=0,
		maximum=60,
	),
	Setting(
		"db_max_connections",
		4,
		"int",
		"connections the scheduler holds to each database server at most, shared by every site on it",
		minimum=1,
		maximum=64,
	),
	Setting("db_idle_secs", 60.0, "float", "seconds a database connection stays open unused", minimum=1, maximum=86400),
	Setting("batch_size", 500, "int", "schedules handled per Redis/SQL round trip", minimum=1, maximum=100000),
	Setting(
		"release_batch_size",
		10000,
		"int",
		"prepared fires queued per release script (about 5 microseconds of Redis each)",
		minimum=1,
		maximum=100000,
	),
	Setting(
		"replica_acks",
		1,
		"int",
		"replicas that must hold each release (and the claims before it) before the leader goes on (WAIT; "
		"only as many as are connected)",
		minimum=0,
		maximum=16,
	),
	Setting(
		"replica_ack_timeout_ms",
		500,
		"int",
		"how long the leader waits for those replicas before it goes on without them",
		minimum=1,
		maximum=60000,
	),
	Setting("log_level", "INFO", "choice", "lowest level logged", choices=LOG_LEVELS),
	Setting("log_format", "text", "choice", "one line per event as text or JSON", choices=LOG_FORMATS),
	Setting(
		"executor",
		FRAPPE_EXECUTOR,
		"choice",
		"how a fired job runs: Frappe's worker wrapper or plain RQ",
		choices=EXECUTORS,
	),
	Setting("redis_url", None, "url", "Redis of the scheduler (default: the bench's redis_queue)"),
	Setting("bench", None, "str", "the Frappe bench directory (default: found from the current directory)"),
	Setting(
		"metrics_port",
		None,
		"int",
		"serve Prometheus metrics on this TCP port (0: any free port, logged); off when unset",
		minimum=0,
		maximum=65535,
	),
	Setting(
		"metrics_address",
		"127.0.0.1",
		"address",
		"the address the metrics port listens on (0.0.0.0 for every interface)",
	),
	Setting(
		"metrics_schedules", (), "names", "schedules whose fires get metrics labelled with their name (btu_schedule_*)"
	),
	Setting(
		"metrics_bearer_token",
		None,
		"str",
		"a scrape must send 'Authorization: Bearer <this>' "
		"(set it in the TOML file: a flag shows in ps, the environment in /proc)",
	),
	Setting(
		"metrics_allow_unauthenticated",
		False,
		"bool",
		"serve metrics without metrics_bearer_token on an address other than loopback "
		"(a network only Prometheus reaches)",
	),
)
SETTINGS_BY_KEY = {setting.key: setting for setting in SETTINGS}


@dataclass(frozen=True)
class Config:
	"""The effective configuration; `sources[key]` says where each value came from."""

	disable_redis_rpc: bool = False
	full_refresh_interval_secs: int = 60
	full_refresh_secs_per_site: float = 0.3
	lease_ttl_secs: float = 5.0
	misfire_grace_secs: float = 10.0
	prepare_ahead_secs: float = 2.0
	db_max_connections: int = 4
	db_idle_secs: float = 60.0
	batch_size: int = 500
	release_batch_size: int = 10000
	replica_acks: int = 1
	replica_ack_timeout_ms: int = 500
	log_level: str = "INFO"
	log_format: str = "text"
	executor: str = FRAPPE_EXECUTOR
	redis_url: str | None = None
	bench: str | None = None
	metrics_port: int | None = None
	metrics_address: str = "127.0.0.1"
	metrics_schedules: tuple[str, ...] = ()
	metrics_bearer_token: str | None = None
	metrics_allow_unauthenticated: bool = False
	sources: dict[str, str] = field(default_factory=lambda: {s.key: "default" for s in SETTINGS}, compare=False)
	config_file: str = DEFAULT_CONFIG_PATH
	config_file_found: bool = False

	def refresh_interval(self, sites: int) -> float:
		"""Seconds in which a staggered cycle reads every site once: `full_refresh_interval_secs` where it is set; by
		default a minute, or `full_refresh_secs_per_site` a site on a bench of more sites than that reads at this pace.
		Edits arrive at once by RPC; the cycle is the safety net for what SQL changed, and a thousand sites read every
		minute were most of an idle scheduler's CPU."""
		if self.sources.get("full_refresh_interval_secs", "default") != "default":
			return self.full_refresh_interval_secs
		return max(self.full_refresh_interval_secs, self.full_refresh_secs_per_site * sites)

	def values(self) -> dict[str, Any]:
		return {setting.key: getattr(self, setting.key) for setting in SETTINGS}

	def masked_values(self) -> dict[str, Any]:
		"""The values with every secret masked, safe to print or log."""
		return {key: mask_secret(key, value) for key, value in self.values().items()}

	def __repr__(self) -> str:
		shown = ", ".join(f"{key}={value!r}" for key, value in self.masked_values().items())
		return f"Config({shown})"

	def load_bench(self):
		"""The bench named by `bench` (or the one holding the current directory)."""
		from btu.scheduler_daemon.reads.bench import Bench

		return Bench.load(self.bench)

	def connections(self):
		"""The database connections these bound: db_max_connections per server, closed after db_idle_secs unused."""
		from btu.scheduler_daemon.reads.connections import Connections
		from btu.scheduler_daemon.reads.database import connect

		return Connections(connect, self.db_max_connections, self.db_idle_secs)

	def keys(self):
		"""The bench's key names (`Bench.keys`); seed 000's with `redis_url` set and no bench to be found."""
		from btu.scheduler_daemon.reads.bench import BenchError
		from btu.shared.keys import Keys

		try:
			bench = self.load_bench()
		except BenchError:
			if not self.redis_url:
				raise
			return Keys()
		return bench.keys

	def redis(self, **kwargs):
		"""A client of the scheduler's Redis: `redis_url`, else the bench's redis_queue.

		With `redis_url` set and no bench to be found, the URL alone is used
		(no bench ACL credentials); without it the bench is required.
		"""
		from btu.scheduler_daemon.reads.bench import BenchError

		try:
			bench = self.load_bench()
		except BenchError:
			if not self.redis_url:
				raise
			import redis

			return redis.Redis.from_url(self.redis_url, **kwargs)
		return bench.redis(self.redis_url, **kwargs)


def format_number(value: float | None) -> str:
	if value is None:
		return "?"
	return str(int(value)) if float(value).is_integer() else str(value)


def mask_secret(key: str, value: Any) -> Any:
	if key in TOKEN_KEYS and value:
		return MASK
	if key in SECRET_KEYS and isinstance(value, str):
		return mask_url(value)
	return value


def describe(key: str, value: Any) -> str:
	return repr(mask_secret(key, value))


def refuse(setting: Setting, value: Any, source: str, problem: str | None = None) -> ConfigError:
	detail = f": {problem}" if problem else ""
	return ConfigError(
		f"configuration key {setting.key} = {describe(setting.key, value)} (from {source}){detail}; "
		f"allowed: {setting.allowed}"
	)


def parse_bool(text: str) -> bool | None:
	return {
		"true": True,
		"1": True,
		"yes": True,
		"on": True,
		"false": False,
		"0": False,
		"no": False,
		"off": False,
	}.get(text.strip().lower())


def convert(setting: Setting, value: Any, source: str, from_text: bool) -> Any:
	"""`value` checked against `setting`; text (env, flag) is parsed, TOML values must have the type."""
	kind = setting.kind
	if kind == "bool":
		if from_text and isinstance(value, str):
			parsed = parse_bool(value)
			if parsed is None:
				raise refuse(setting, value, source)
			return parsed
		if not isinstance(value, bool):
			raise refuse(setting, value, source, f"a {type(value).__name__} is not a boolean")
		return value
	if kind in ("int", "float"):
		number = parse_number(setting, value, source, from_text)
		if not (setting.minimum <= number <= setting.maximum):
			raise refuse(setting, value, source, "out of range")
		return number
	if kind == "names":
		return convert_names(setting, value, source)
	if not isinstance(value, str):
		raise refuse(setting, value, source, f"a {type(value).__name__} is not a string")
	if kind == "choice":
		normalized = value.strip().upper() if setting.key == "log_level" else value.strip().lower()
		if normalized not in setting.choices:
			raise refuse(setting, value, source, "unknown value")
		return normalized
	text = value.strip()
	if not text:
		raise refuse(setting, value, source, "empty")
	if kind == "url":
		if not is_redis_url(text):
			raise refuse(setting, value, source, "not a Redis URL")
	if kind == "address" and not is_address(text):
		raise refuse(setting, value, source, "neither an IP address nor a host name")
	return text


def is_address(text: str) -> bool:
	try:
		ipaddress.ip_address(text)
		return True
	except ValueError:
		# 999.1.1.1 fits the host name pattern but is a mistyped address, not a name.
		return bool(HOSTNAME.match(text)) and not text.replace(".", "").isdigit()


def convert_names(setting: Setting, value: Any, source: str) -> tuple[str, ...]:
	"""A list of names: a TOML list of strings, or text split at commas (flags, the environment)."""
	if isinstance(value, str):
		items = value.split(",")
	elif isinstance(value, (list, tuple)) and all(isinstance(item, str) for item in value):
		items = list(value)
	else:
		raise refuse(setting, value, source, "not a list of strings")
	names = tuple(dict.fromkeys(item.strip() for item in items if item.strip()))
	bad = next((name for name in names if len(name) > 140 or not name.isprintable()), None)
	if bad is not None:
		raise refuse(setting, value, source, f"{bad[:40]!r} is not a schedule name (printable, at most 140 characters)")
	if len(names) > MAX_METRICS_SCHEDULES:
		raise refuse(setting, value, source, f"{len(names)} names; each adds series of its own")
	return names


def parse_number(setting: Setting, value: Any, source: str, from_text: bool) -> int | float:
	if from_text and isinstance(value, str):
		try:
			number = int(value.strip()) if setting.kind == "int" else float(value.strip())
		except ValueError:
			raise refuse(
				setting, value, source, f"not {'an integer' if setting.kind == 'int' else 'a number'}"
			) from None
	elif isinstance(value, bool):
		raise refuse(setting, value, source, "a boolean is not a number")
	elif setting.kind == "int" and isinstance(value, int):
		number = value
	elif setting.kind == "float" and isinstance(value, (int, float)):
		number = float(value)
	else:
		raise refuse(
			setting,
			value,
			source,
			f"a {type(value).__name__} is not {'an integer' if setting.kind == 'int' else 'a number'}",
		)
	if isinstance(number, float) and not math.isfinite(number):
		raise refuse(setting, value, source, "not a finite number")
	return number


def unknown_key(key: str, source: str, value: Any = None) -> ConfigError:
	close = difflib.get_close_matches(key.lower(), SETTINGS_BY_KEY, n=1)
	hint = f" (did you mean {close[0]}?)" if close else ""
	if isinstance(value, dict):
		# A [section] header: the keys below it are read as the section's, not as settings.
		hint = f" (a [{key}] section: the file takes its keys at the top level, so remove the [{key}] line)"
	return ConfigError(
		f"unknown configuration key {key!r} (from {source}){hint}; known keys: {', '.join(SETTINGS_BY_KEY)}"
	)


def read_file(path: str) -> dict | None:
	"""The TOML table in `path`, or None when there is no such file."""
	try:
		with open(path, "rb") as handle:
			return tomllib.load(handle)
	except FileNotFoundError:
		return None
	except IsADirectoryError:
		raise ConfigError(f"configuration file {path} is a directory; pass the path of a TOML file") from None
	except OSError as exc:
		raise ConfigError(f"configuration file {path} cannot be read ({exc.strerror}); fix its permissions") from None
	except tomllib.TOMLDecodeError as exc:
		raise ConfigError(f"configuration file {path} is not valid TOML ({exc}); fix the file") from None
	except UnicodeDecodeError as exc:
		raise ConfigError(f"configuration file {path} is not UTF-8 ({exc}); fix the file") from None


def add_config_flags(parser: argparse.ArgumentParser) -> None:
	"""Add ``--config`` and one ``--<key>`` flag per configuration key to `parser`."""
	group = parser.add_argument_group("configuration (flag > BTU_SCHEDULER_<KEY> > file > default)")
	group.add_argument(
		"--config",
		metavar="PATH",
		default=None,
		help=f"TOML configuration file (default: ${CONFIG_PATH_ENV} or {DEFAULT_CONFIG_PATH}; a missing file is fine)",
	)
	for setting in SETTINGS:
		if setting.kind == "bool":
			group.add_argument(
				setting.flag,
				dest=setting.key,
				nargs="?",
				const="true",
				default=None,
				metavar="BOOL",
				help=f"{setting.help} (default {str(setting.default).lower()})",
			)
		else:
			metavar = "DIR" if setting.key == "bench" else setting.key.split("_")[-1].upper()
			default = "none" if setting.default in (None, ()) else setting.default
			group.add_argument(
				setting.flag,
				dest=setting.key,
				default=None,
				metavar=metavar,
				help=f"{setting.help} (default {default})",
			)


def load_config(args: argparse.Namespace | None = None, environ: dict[str, str] | None = None) -> Config:
	"""The effective configuration for parsed `args` (flags of `add_config_flags`) and the environment."""
	env = os.environ if environ is None else environ
	values = {setting.key: setting.default for setting in SETTINGS}
	sources = {setting.key: "default" for setting in SETTINGS}

	path = getattr(args, "config", None) or env.get(CONFIG_PATH_ENV) or DEFAULT_CONFIG_PATH
	table = read_file(path)
	if table is not None:
		source = f"file {path}"
		for key, value in table.items():
			setting = SETTINGS_BY_KEY.get(key)
			if setting is None:
				raise unknown_key(key, source, value)
			values[key] = convert(setting, value, source, from_text=False)
			sources[key] = source

	for name, value in env.items():
		if not name.startswith(ENV_PREFIX) or name == CONFIG_PATH_ENV:
			continue
		key = name[len(ENV_PREFIX) :].lower()
		source = f"env {name}"
		setting = SETTINGS_BY_KEY.get(key)
		if setting is None or setting.env != name:
			raise unknown_key(name[len(ENV_PREFIX) :], source)
		if value == "":  # an empty variable counts as unset, as shells and compose files pass them
			continue
		values[key] = convert(setting, value, source, from_text=True)
		sources[key] = source

	for setting in SETTINGS:
		value = getattr(args, setting.key, None)
		if value is None:
			continue
		source = f"flag {setting.flag}"
		values[setting.key] = convert(setting, value, source, from_text=True)
		sources[setting.key] = source

	return Config(**values, sources=sources, config_file=path, config_file_found=table is not None)
