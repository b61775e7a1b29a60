"""Dev benches: directories the scheduler treats exactly like a real Frappe bench.

A dev bench has bench's own markers (``Procfile``, ``apps/``, ``config/``,
``env/``, ``sites/``), ``sites/common_site_config.json`` and ``apps.txt``, the
apps linked into ``apps/`` (btu itself, the dev bench's own app ``btu_demo``
whose hooks.py declares the demo's task functions, and any given with `apps`), and
per site a ``site_config.json`` and a MariaDB database and user made as
``bench new-site`` makes them (user name = db_name, GRANT ALL on that
database). The BTU tables are created from the app's own DocType JSON files
with the columns Frappe v15 gives them (see `schema`), plus
``tabSingles`` with the rows the scheduler reads. No Frappe is installed and
frappe is never imported.

Database names are ``_btu`` + 12 hex digits of sha1(real bench path, site),
so two dev benches never share a database. A ``.btu-dev-bench`` file marks the
directory, and `drop_dev_bench` refuses any directory without it.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import secrets
import shutil
from pathlib import Path

import pymysql

import btu
from btu.scheduler_daemon.reads.bench import Bench, BenchError, read_json
from btu.shared import sealed
from devbench.data import read_single, write_single
from devbench.schema import FRAPPE_JOB_DDL, SERIES_DDL, SINGLES_DDL, DocTypeSchema, load_doctypes

MARKER = ".btu-dev-bench"
DB_PREFIX = "_btu"
# '%' for TCP logins; 'localhost' too, or an anonymous ''@'localhost' user
# (present on some installs) would shadow '%' for local connections.
DB_USER_HOSTS = ("%", "localhost")
DEV_TIME_ZONE = "UTC"
APPS = ("frappe", "btu")
# The directory holding the btu package imported here: apps/btu links to it, as `bench get-app` lays an app out.
BTU_SOURCE = Path(btu.__file__).resolve().parents[1]
# The dev bench's own app (devbench/apps/btu_demo/btu_demo/hooks.py declares the demo's tasks): in every dev bench,
# never in a production one, so BTU's own hooks.py declares nothing of the dev tooling.
DEMO_APP = "btu_demo"
DEMO_APP_SOURCE = Path(__file__).resolve().parent / "apps" / DEMO_APP
APP_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")
PROCFILE = "# A BTU dev bench (python -m devbench bench): it has no bench processes of its own.\n"
SITE_NAME = re.compile(r"^[A-Za-z0-9](?:[A-Za-z0-9.-]{0,62}[A-Za-z0-9])?$")
RESERVED_SITE_NAMES = ("assets", "apps.txt", "common_site_config.json")


class DevBenchError(Exception):
	"""A dev bench that cannot be made or dropped; the message names the input and the fix."""


class DevBenchInputError(DevBenchError):
	"""Bad input: a site name, a directory that is not a dev bench."""


def database_name(bench_path: str | os.PathLike, site: str) -> str:
	"""The database (and user) name of `site` in the dev bench at `bench_path`."""
	digest = hashlib.sha1(f"{os.path.realpath(bench_path)}\n{site}".encode()).hexdigest()
	return f"{DB_PREFIX}{digest[:12]}"


def root_connection(host: str, port: int, user: str, password: str) -> pymysql.Connection:
	try:
		return pymysql.connect(
			host=host,
			port=int(port),
			user=user,
			password=password,
			charset="utf8mb4",
			autocommit=True,
			connect_timeout=10,
		)
	except pymysql.MySQLError as exc:
		raise DevBenchError(
			f"MariaDB at {host}:{port} refused a login as {user!r} ({exc.args[-1]}): start it with scripts/services, "
			"or pass --db-host/--db-port/--db-root-user/--db-root-password"
		) from exc


def create_dev_bench(
	path: str | os.PathLike,
	sites: tuple[str, ...] | list[str] = ("site1.localhost",),
	*,
	db_host: str = "127.0.0.1",
	db_port: int = 3306,
	db_root_user: str = "root",
	db_root_password: str = "",
	redis_url: str = "redis://127.0.0.1:6379/0",
	time_zone: str | None = None,
	bench_id: str | None = None,
	apps: dict[str, str | os.PathLike] | None = None,
) -> Bench:
	"""Make (or bring up to date) the dev bench at `path` with `sites`, and return it.

	Running it again keeps every row: tables get missing columns and indexes,
	and config files keep keys they already have. `time_zone` sets System
	Settings' time zone; without it a new site gets "UTC". `apps` maps more
	app names to the directory holding each one's package: they are linked
	into apps/ and listed in apps.txt (after btu and btu_demo), so the rq
	executor may run the functions they declare (btu.shared.declared).
	"""
	sites = tuple(sites)
	validate_sites(sites)
	apps = {"btu": BTU_SOURCE, DEMO_APP: DEMO_APP_SOURCE, **(apps or {})}
	validate_apps(apps)
	root = Path(path).expanduser()
	prepare_directory(root)
	root = root.resolve()
	write_layout(root, db_host, db_port, redis_url, bench_id, apps)
	schemas = load_doctypes()

	conn = root_connection(db_host, db_port, db_root_user, db_root_password)
	try:
		for site in sites:
			config = write_site_config(root, site)
			make_database(conn, config["db_name"], config["db_password"])
			site_conn = site_connection(db_host, db_port, config)
			try:
				sync_tables(site_conn, config["db_name"], schemas)
				write_singles(site_conn, time_zone)
			finally:
				site_conn.close()
	finally:
		conn.close()
	try:
		return Bench.load(root)
	except BenchError as exc:
		raise DevBenchError(str(exc)) from exc


def drop_dev_bench(path: str | os.PathLike, *, db_root_user: str = "root", db_root_password: str = "") -> None:
	"""Drop the databases and users of the dev bench at `path`, then remove the directory.

	A missing directory is already dropped. A directory without the dev-bench
	marker is refused: it may be a real bench.
	"""
	root = Path(path).expanduser()
	if not root.exists():
		return
	if not (root / MARKER).is_file():
		raise DevBenchInputError(f"{root} is not a dev bench (it has no {MARKER} file): refusing to drop it")
	root = root.resolve()
	common = read_json(root / "sites" / "common_site_config.json")
	sites = [entry for entry in sorted((root / "sites").glob("*/site_config.json"))]
	if sites:
		conn = root_connection(
			common.get("db_host") or "127.0.0.1", int(common.get("db_port") or 3306), db_root_user, db_root_password
		)
		try:
			with conn.cursor() as cur:
				for site_config in sites:
					db_name = read_json(site_config).get("db_name")
					# Only what this bench made: a copied bench's config names the original's database.
					if db_name != database_name(root, site_config.parent.name):
						continue
					cur.execute(f"DROP DATABASE IF EXISTS `{db_name}`")
					for host in DB_USER_HOSTS:
						cur.execute("DROP USER IF EXISTS %s@%s", (db_name, host))
		finally:
			conn.close()
	shutil.rmtree(root)


def validate_sites(sites: tuple[str, ...]) -> None:
	if not sites:
		raise DevBenchInputError("no site given: pass at least one --site NAME, e.g. --site site1.localhost")
	for site in sites:
		if not SITE_NAME.match(site) or site in RESERVED_SITE_NAMES or ".." in site:
			raise DevBenchInputError(
				f"site {site!r}: not a valid site name; use letters, digits, dots and dashes, e.g. site1.localhost"
			)


def validate_apps(apps: dict) -> None:
	for name, source in apps.items():
		if not APP_NAME.match(name) or not str(source) or not (Path(source).expanduser() / name).is_dir():
			raise DevBenchInputError(
				f"app {name!r} from {source}: give an app name (a Python identifier) and the directory that holds "
				f"its package, e.g. --app myapp=~/src/myapp for ~/src/myapp/myapp/hooks.py"
			)


def prepare_directory(root: Path) -> None:
	if root.exists() and not root.is_dir():
		raise DevBenchInputError(f"{root} exists and is not a directory: choose another DIR")
	if root.is_dir() and not (root / MARKER).exists() and any(root.iterdir()):
		raise DevBenchInputError(
			f"{root} is not empty and not a dev bench (no {MARKER} file): choose a new or empty DIR"
		)
	root.mkdir(parents=True, exist_ok=True)
	(root / MARKER).write_text(
		"Made by `python -m devbench bench`; `python -m devbench bench DIR --drop` removes it.\n"
	)


def write_json(path: Path, data: dict) -> None:
	"""As Frappe writes site configs: indent 1, sorted keys."""
	path.write_text(json.dumps(data, indent=1, sort_keys=True) + "\n")


def write_layout(root: Path, db_host: str, db_port: int, redis_url: str, bench_id: str | None, apps: dict) -> None:
	for folder in ("apps", "config", "env", "logs", "sites"):
		(root / folder).mkdir(exist_ok=True)
	procfile = root / "Procfile"
	if not procfile.exists():
		procfile.write_text(PROCFILE)
	common_path = root / "sites" / "common_site_config.json"
	common = read_json(common_path)
	common.update({"redis_queue": redis_url, "db_host": db_host, "db_port": int(db_port)})
	if bench_id:
		common["bench_id"] = bench_id
	write_json(common_path, common)
	for name, source in apps.items():
		link = root / "apps" / name
		if link.is_symlink() or not link.exists():
			link.unlink(missing_ok=True)
			link.symlink_to(Path(source).expanduser().resolve(), target_is_directory=True)
	# Apps listed by an earlier run stay listed.
	listed = (root / "sites" / "apps.txt").read_text().split() if (root / "sites" / "apps.txt").exists() else []
	(root / "sites" / "apps.txt").write_text("\n".join(dict.fromkeys([*APPS, *listed, *apps])))


def write_site_config(root: Path, site: str) -> dict:
	"""The site's config with db_name, db_password and db_type; an existing password is kept."""
	site_path = root / "sites" / site
	site_path.mkdir(exist_ok=True)
	config_path = site_path / "site_config.json"
	config = read_json(config_path)
	db_name = database_name(root, site)
	if config.get("db_name") != db_name or not config.get("db_password"):
		config["db_password"] = secrets.token_hex(8)
	config.update({"db_name": db_name, "db_type": "mariadb"})
	write_json(config_path, config)
	return config


def make_database(conn: pymysql.Connection, db_name: str, password: str) -> None:
	"""`frappe.database.db_manager.DbManager`'s create_user, create_database and grant_all_privileges."""
	with conn.cursor() as cur:
		cur.execute(f"CREATE DATABASE IF NOT EXISTS `{db_name}` CHARACTER SET utf8mb4 COLLATE utf8mb4_unicode_ci")
		for host in DB_USER_HOSTS:
			cur.execute("CREATE USER IF NOT EXISTS %s@%s IDENTIFIED BY %s", (db_name, host, password))
			cur.execute("ALTER USER %s@%s IDENTIFIED BY %s", (db_name, host, password))
			cur.execute(f"GRANT ALL PRIVILEGES ON `{db_name}`.* TO %s@%s", (db_name, host))
		cur.execute("FLUSH PRIVILEGES")


def site_connection(db_host: str, db_port: int, config: dict) -> pymysql.Connection:
	try:
		return pymysql.connect(
			host=db_host,
			port=int(db_port),
			user=config["db_name"],
			password=config["db_password"],
			database=config["db_name"],
			charset="utf8mb4",
			autocommit=True,
			connect_timeout=10,
		)
	except pymysql.MySQLError as exc:
		raise DevBenchError(
			f"MariaDB at {db_host}:{db_port} refused the site user {config['db_name']!r} it just made "
			f"({exc.args[-1]}): "
			"check that the server allows TCP logins of '%' users"
		) from exc


def sync_tables(conn: pymysql.Connection, db_name: str, schemas: dict[str, DocTypeSchema]) -> None:
	"""Create each DocType's table, or add what an existing one lacks."""
	with conn.cursor() as cur:
		cur.execute(SINGLES_DDL)
		cur.execute(SERIES_DDL)
		cur.execute(FRAPPE_JOB_DDL)
		cur.execute(sealed.MARIADB_DDL)
		for schema in schemas.values():
			if schema.issingle:
				continue
			cur.execute(
				"SELECT COLUMN_NAME, COLUMN_TYPE FROM information_schema.COLUMNS "
				"WHERE TABLE_SCHEMA=%s AND TABLE_NAME=%s",
				(db_name, schema.table),
			)
			current_types = {name.lower(): coltype for name, coltype in cur.fetchall()}
			if not current_types:
				cur.execute(schema.create_sql())
				continue
			cur.execute(
				"SELECT COLUMN_NAME, INDEX_NAME FROM information_schema.STATISTICS "
				"WHERE TABLE_SCHEMA=%s AND TABLE_NAME=%s AND SEQ_IN_INDEX=1",
				(db_name, schema.table),
			)
			rows = cur.fetchall()
			current_indexed = {column.lower() for column, _ in rows}
			current_index_names = {name.lower() for _, name in rows}
			for statement in schema.alter_sql(current_types, current_indexed, current_index_names):
				cur.execute(statement)


def write_singles(conn: pymysql.Connection, time_zone: str | None) -> None:
	"""The Singles the scheduler reads; a value already there stays unless `time_zone` is given."""
	with conn.cursor() as cur:
		if time_zone:
			write_single(cur, "System Settings", "time_zone", time_zone)
		for doctype, fieldname, value in (
			("System Settings", "time_zone", DEV_TIME_ZONE),
			("System Settings", "enable_scheduler", 1),
			("BTU Configuration", "enabled", 1),
		):
			if read_single(cur, doctype, fieldname) is None:
				write_single(cur, doctype, fieldname, value)
