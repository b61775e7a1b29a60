"""A Frappe bench and its sites, read from the directory layout as Frappe reads it.

A bench is a directory holding ``Procfile``, ``apps``, ``config``, ``env``
and ``sites`` (bench's own test). A site is a real directory under ``sites/``
with a ``site_config.json``. A site's configuration is
``common_site_config.json`` updated with its ``site_config.json``, then the
``FRAPPE_*`` environment overrides and defaults, as in
``frappe.get_site_config``. The values the scheduler relies on (``redis_queue``,
``workers``, ``db_port``) are checked as they are read: a `BenchError` names
the file or variable, the key and the fix, instead of a traceback later.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path

from btu.scheduler_daemon.reads.app_files import AppFiles
from btu.shared.declared import ALLOW_ANY_APP_FUNCTION, config_flag
from btu.shared.job_contract import RQ_EXECUTOR
from btu.shared.keys import NAMESPACE_SETTING, Keys, namespace_problem
from btu.shared.redis_urls import REDIS_URL_SCHEMES, is_redis_url, mask_url
from btu.shared.sentinel import SentinelConfigError, SentinelSettings
from btu.shared.task_args import json_type

BENCH_MARKERS = ("Procfile", "apps", "config", "env", "sites")
DEFAULT_REDIS_QUEUE = "redis://127.0.0.1:11311"
# frappe.utils.background_jobs.get_queues_timeout, in priority order.
STANDARD_QUEUE_TIMEOUTS = {"short": 300, "default": 300, "long": 1500}
DEFAULT_WORKER_TIMEOUT = 300


# BTU's Redis entries join a site and a schedule with "|" and fields with tabs, and Frappe's job ids
# put "::" after the site: a site holding them could never be told apart, so it would never fire.
SITE_NAME_SEPARATORS = ("|", ":")


class BenchError(Exception):
	"""A bench or site that cannot be read; the message says which file and how to fix it."""


def site_name_problem(name: str) -> str | None:
	"""Why BTU cannot schedule for a site of this name, or None."""
	held = [char for char in SITE_NAME_SEPARATORS if char in name]
	if held:
		what = " and ".join(repr(char) for char in held)
	elif not name.isprintable():
		what = "control characters (tab, newline, ...)"
	else:
		return None
	return (
		f"site {name!r}: the name holds {what}, which BTU uses as separators in its Redis keys and job ids, so BTU "
		"does not schedule for this site; use a site name without '|', ':' or control characters (a new site, or "
		"rename its directory under sites/)"
	)


def frappe_bench_id(conf: dict, bench_path: Path) -> str:
	"""`frappe.utils.get_bench_id` with `conf` as Frappe's conf: its bench_id when the key is there (even empty,
	as Frappe's `conf.get("bench_id", default)`), else the real bench path (FRAPPE_BENCH_ROOT first) with / as -."""
	if "bench_id" in conf:
		return str(conf["bench_id"])
	root = os.environ.get("FRAPPE_BENCH_ROOT") or os.path.realpath(bench_path)
	return root.strip("/").replace("/", "-")


def is_bench_directory(path: Path) -> bool:
	return all((path / marker).exists() for marker in BENCH_MARKERS)


def find_bench(start: str | os.PathLike | None = None) -> Path:
	"""The bench containing `start` (default: the current directory), as bench finds it."""
	here = Path(start or os.getcwd()).resolve()
	for candidate in (here, *here.parents):
		if is_bench_directory(candidate):
			return candidate
	raise BenchError(
		f"no Frappe bench contains {here} (a bench holds {', '.join(BENCH_MARKERS)}): "
		"run inside a bench or pass --bench DIR"
	)


def read_json(path: Path) -> dict:
	try:
		text = path.read_text()
	except FileNotFoundError:
		return {}
	except OSError as exc:
		raise BenchError(f"{path}: cannot be read ({exc.strerror})") from exc
	if not text.strip():
		return {}
	try:
		data = json.loads(text)
	except ValueError as exc:
		raise BenchError(f"{path}: not valid JSON ({exc}); fix the file") from exc
	if not isinstance(data, dict):
		raise BenchError(f"{path}: must hold a JSON object, found {json_type(data)}; fix the file")
	return data


def as_int(value) -> int | None:
	"""`value` as Frappe's int() reads a config number (3306, "3306", 3306.0), else None."""
	if isinstance(value, bool):
		return None
	if isinstance(value, float):
		return int(value) if value.is_integer() else None
	try:
		return int(str(value).strip()) if isinstance(value, (int, str)) else None
	except ValueError:
		return None


def check_redis_url(value, where: str) -> None:
	if not isinstance(value, str) or not is_redis_url(value):
		shown = repr(mask_url(value)) if isinstance(value, str) else repr(value)
		raise BenchError(
			f"{where} = {shown} is not a Redis URL; "
			f"write it as redis://HOST:PORT (schemes {', '.join(REDIS_URL_SCHEMES)})"
		)


def check_common_config(path: Path, conf: dict) -> None:
	"""Refuse the common_site_config.json values the scheduler would otherwise fail on later, deep in a loop."""
	if os.environ.get("FRAPPE_REDIS_QUEUE"):
		check_redis_url(os.environ["FRAPPE_REDIS_QUEUE"], "environment variable FRAPPE_REDIS_QUEUE")
	elif conf.get("redis_queue") not in (None, ""):
		check_redis_url(conf["redis_queue"], f"{path}: redis_queue")
	try:
		SentinelSettings.from_config(conf, path)
	except SentinelConfigError as exc:
		raise BenchError(str(exc)) from exc
	workers = conf.get("workers")
	if workers is None:
		return
	shape = 'an object such as {"long": {"timeout": 1500}}'
	if not isinstance(workers, dict):
		raise BenchError(f"{path}: workers must be {shape}, found {json_type(workers)}; fix the file")
	for name, worker in workers.items():
		if worker is None:
			continue
		if not isinstance(worker, dict):
			raise BenchError(f"{path}: workers.{name} must be {shape}, found {json_type(worker)}; fix the file")
		timeout = worker.get("timeout")
		if timeout not in (None, "") and as_int(timeout) is None:
			raise BenchError(
				f"{path}: workers.{name}.timeout = {timeout!r} is not a whole number of seconds; fix the file"
			)


def check_site_config(name: str, site_path: Path, common_path: Path, own: dict, config: dict) -> None:
	"""Refuse a site's db_port that is not a port, naming the file (or variable) it came from."""
	port = config.get("db_port")
	if port in (None, ""):
		return
	number = as_int(port)
	if number is None or not 0 < number < 65536:
		if os.environ.get("FRAPPE_DB_PORT"):
			where = "environment variable FRAPPE_DB_PORT"
		else:
			where = str(site_path / "site_config.json" if "db_port" in own else common_path)
		raise BenchError(
			f"site {name!r}: db_port = {port!r} in {where} is not a port number; give an integer from 1 to 65535, "
			"or remove the key for the default"
		)


@dataclass(frozen=True)
class Site:
	name: str
	path: Path
	config: dict

	@cached_property
	def db_type(self) -> str:
		return self.config.get("db_type") or "mariadb"

	@cached_property
	def db_params(self) -> dict:
		"""Connection parameters, as `frappe.connect` derives them (v15 and v16)."""
		conf = self.config
		postgres = self.db_type == "postgres"
		return {
			"host": conf.get("db_host") or "127.0.0.1",
			"port": int(conf.get("db_port") or (5432 if postgres else 3306)),
			"user": conf.get("db_user") or conf.get("db_name"),
			"password": conf.get("db_password") or "",
			"database": conf.get("db_name"),
			"socket": conf.get("db_socket"),
		}

	@property
	def bench_id(self) -> str:
		"""`frappe.utils.get_bench_id` inside this site: its conf has site_config.json over common_site_config.json."""
		return frappe_bench_id(self.config, self.path.parent.parent)

	@property
	def paused(self) -> str | None:
		"""Why the site's scheduling is paused by its config, or None."""
		for key in ("maintenance_mode", "pause_scheduler"):
			if self.config.get(key):
				return key
		return None


# site_config.json path -> (its file's version and the common config's, the Site read from them)
SITES_READ: dict[str, tuple[tuple, Site]] = {}


class SiteMissing(BenchError):
	"""The site's directory or its site_config.json is gone (dropped since the sites were listed)."""


@dataclass
class Bench:
	path: Path
	common_config: dict = field(default_factory=dict)

	@classmethod
	def load(cls, path: str | os.PathLike | None = None) -> Bench:
		bench_path = Path(path).resolve() if path else find_bench()
		if not bench_path.exists():
			raise BenchError(f"{bench_path} does not exist: pass --bench DIR with the path of a Frappe bench")
		if not (bench_path / "sites").is_dir():
			raise BenchError(f"{bench_path} has no sites/ directory: is it a Frappe bench? pass --bench DIR")
		common_path = bench_path / "sites" / "common_site_config.json"
		common = read_json(common_path)
		check_common_config(common_path, common)
		return cls(bench_path, common)

	@property
	def sites_path(self) -> Path:
		return self.path / "sites"

	@property
	def bench_id(self) -> str:
		"""The bench's id as its queue names carry it (`frappe_bench_id` of common_site_config.json)."""
		return frappe_bench_id(self.common_config, self.path)

	@cached_property
	def queue_timeouts(self) -> dict[str, int]:
		"""Queue type -> timeout, standard queues first, then `workers` of common config."""
		timeouts = dict(STANDARD_QUEUE_TIMEOUTS)
		workers = self.common_config.get("workers") or {}
		if isinstance(workers, dict):
			for name, worker in workers.items():
				timeout = worker.get("timeout") if isinstance(worker, dict) else None
				timeouts[name] = (
					as_int(timeout) or DEFAULT_WORKER_TIMEOUT
				)  # Bench.load refused the ones that are not numbers
		return timeouts

	@cached_property
	def app_files(self) -> AppFiles:
		"""What the installed apps declare runnable (read once per Bench; a full reconcile loads a new one).

		`btu_allow_any_app_function` counts from common_site_config.json only: rq jobs run in no site.
		"""
		return AppFiles(self.path, config_flag(self.common_config.get(ALLOW_ANY_APP_FUNCTION)))

	@cached_property
	def any_app_files(self) -> AppFiles:
		"""The installed apps with the escape hatch on: what the frappe executor's task runner allows on a site whose
		site_config.json sets `btu_allow_any_app_function` (its jobs run in that site)."""
		return AppFiles(self.path, True)

	def app_files_for(self, site: Site, executor: str) -> AppFiles:
		"""What may fire on `site` with `executor`: the bench's declarations, or any app function where the site's
		own config allows it and the task runner runs the job in that site."""
		if executor != RQ_EXECUTOR and config_flag(site.config.get(ALLOW_ANY_APP_FUNCTION)):
			return self.any_app_files
		return self.app_files

	def queue_name(self, queue_type: str) -> str:
		"""`frappe.utils.background_jobs.generate_qname`: "<bench_id>:<type>"."""
		return f"{self.bench_id}:{queue_type}"

	@property
	def redis_queue_url(self) -> str:
		return os.environ.get("FRAPPE_REDIS_QUEUE") or self.common_config.get("redis_queue") or DEFAULT_REDIS_QUEUE

	@property
	def redis_credentials(self) -> dict:
		"""ACL credentials as `frappe.utils.background_jobs.get_redis_conn` picks them."""
		conf = self.common_config
		if conf.get("use_rq_auth"):
			return {"username": conf.get("rq_username") or self.bench_id, "password": conf.get("rq_password")}
		if os.environ.get("RQ_ADMIN_PASWORD"):  # sic: Frappe's spelling
			return {"username": "default", "password": os.environ["RQ_ADMIN_PASWORD"]}
		return {}

	@cached_property
	def sentinel(self) -> SentinelSettings | None:
		"""Frappe's Sentinel settings for the queue Redis if `redis_queue_sentinel_enabled` (checked by Bench.load)."""
		return SentinelSettings.from_config(self.common_config, self.sites_path / "common_site_config.json")

	@property
	def namespace(self) -> str | None:
		"""`btu_namespace`: the name that gives the bench BTU keys of its own on a Redis other benches share."""
		value = self.common_config.get(NAMESPACE_SETTING)
		problem = namespace_problem(value)
		if problem:
			raise BenchError(f"{self.sites_path / 'common_site_config.json'}: {problem}")
		return value or None

	@property
	def keys(self) -> Keys:
		"""The bench's BTU key names, for its namespace."""
		return Keys(self.namespace)

	def redis(self, url: str | None = None, **kwargs):
		"""A client of the bench's queue Redis, with its ACL credentials: `url` if given, else as Frappe's
		`RedisQueue.get_connection` finds it: the Sentinel master when enabled, else `redis_queue`."""
		import redis

		options = {"health_check_interval": 30, **kwargs}
		if url is None and self.sentinel is not None:
			return self.sentinel.connect(self.redis_credentials, **options)
		options = {**self.redis_credentials, **options}
		return redis.Redis.from_url(url or self.redis_queue_url, **{k: v for k, v in options.items() if v is not None})

	@property
	def default_site(self) -> str | None:
		return os.environ.get("FRAPPE_SITE") or self.common_config.get("default_site")

	def site_names(self) -> list[str]:
		"""`frappe.utils.get_sites`: real directories holding site_config.json."""
		try:
			entries = list(os.scandir(self.sites_path))
		except (FileNotFoundError, NotADirectoryError):
			return []
		return sorted(
			entry.name
			for entry in entries
			if entry.is_dir(follow_symlinks=False) and os.path.exists(os.path.join(entry.path, "site_config.json"))
		)

	def site(self, name: str) -> Site:
		"""The site with its config (common_site_config.json under its site_config.json); read again only when its file
		changed: a reconcile asks for every site each cycle, and reading a thousand files was most of an idle
		scheduler's CPU. Raises SiteMissing when the site has no site_config.json (any more)."""
		problem = site_name_problem(name)
		if problem:
			raise BenchError(problem)
		path = self.sites_path / name
		config_path = os.path.join(path, "site_config.json")
		try:
			stat = os.stat(config_path)
		except FileNotFoundError:
			raise SiteMissing(f"site {name!r}: {config_path} does not exist") from None
		except OSError as exc:
			raise BenchError(f"{config_path}: cannot be read ({exc.strerror})") from exc
		version = (stat.st_mtime_ns, stat.st_ctime_ns, stat.st_size, stat.st_ino, self.common_version)
		cached = SITES_READ.get(config_path)
		if cached is not None and cached[0] == version:
			return cached[1]
		own = read_json(Path(config_path))
		config = dict(self.common_config)
		config.update(own)
		apply_env_overrides(config)
		check_site_config(name, path, self.sites_path / "common_site_config.json", own, config)
		site = Site(name, path, config)
		SITES_READ[config_path] = (version, site)
		return site

	@cached_property
	def common_version(self) -> str:
		"""Tells one common_site_config.json from another, for SITES_READ."""
		return json.dumps(self.common_config, sort_keys=True, default=str)

	def sites(self) -> list[Site]:
		return [self.site(name) for name in self.site_names()]


def apply_env_overrides(config: dict) -> None:
	"""The environment overrides `frappe.get_site_config` applies."""
	for key, env in (
		("redis_queue", "FRAPPE_REDIS_QUEUE"),
		("db_type", "FRAPPE_DB_TYPE"),
		("db_socket", "FRAPPE_DB_SOCKET"),
		("db_host", "FRAPPE_DB_HOST"),
		("db_port", "FRAPPE_DB_PORT"),
		("db_user", "FRAPPE_DB_USER"),
		("db_name", "FRAPPE_DB_NAME"),
	):
		if os.environ.get(env):
			config[key] = os.environ[env]
