"""The bench's reader login on its MariaDB servers: the grants `btu-scheduler setup db-reader` prints or applies.

The reader may SELECT the tables a reconcile reads of each site (`server_read.READ_TABLES`, those the site
has) and nothing else: not `__Auth`, not a user's documents. It is created for the hosts Frappe creates a
site's user for ('%' and 'localhost'), with a password of its own kept in common_site_config.json beside
the bench's other shared settings. Applying is idempotent: run it again after `bench new-site` (until then a
new site is read on its own login, only more slowly).
"""

from __future__ import annotations

import json
import os
import secrets
import tempfile
from dataclasses import dataclass
from pathlib import Path

from btu.scheduler_daemon.reads.bench import Bench, BenchError, Site
from btu.scheduler_daemon.reads.connections import Connections, Server
from btu.scheduler_daemon.reads.database import DatabaseError, SiteDatabase, connect
from btu.scheduler_daemon.reads.server_read import READ_TABLES, READER_PASSWORD_KEY, READER_USER_KEY, ReaderLogin

DEFAULT_USER = "btu_reader"
USER_HOSTS = ("%", "localhost")


@dataclass(frozen=True)
class Grant:
	"""SELECT on one table of one site's database."""

	site: str
	database: str
	table: str

	def sql(self, user: str, host: str) -> str:
		return f"GRANT SELECT ON {identifier(self.database)}.{identifier(self.table)} TO {account(user, host)}"


def identifier(name: str) -> str:
	return "`" + name.replace("`", "``") + "`"


def text(value: str) -> str:
	return "'" + value.replace("\\", "\\\\").replace("'", "\\'") + "'"


def account(user: str, host: str) -> str:
	return f"{text(user)}@{text(host)}"


@dataclass
class ServerGrants:
	"""What the reader needs on one server; `unread`: sites whose tables could not be listed (own login failed)."""

	server: Server
	site: Site  # any site on the server: where its address comes from
	grants: list[Grant]
	unread: dict[str, str]  # site -> why


def login_for(bench: Bench, user: str | None) -> tuple[ReaderLogin, bool]:
	"""The login common_site_config.json names (kept), else a new one named `user`; True when it is new."""
	configured = ReaderLogin.of(bench.common_config)
	if configured is not None and (user is None or user == configured.user):
		return configured, False
	return ReaderLogin(user or DEFAULT_USER, secrets.token_urlsafe(24)), True


def needed_grants(bench: Bench) -> dict[Server, ServerGrants]:
	"""Per MariaDB server, the reader's grants on the tables each BTU site has, listed on the site's own login."""
	connections = Connections(connect, limit=1, idle_secs=0)
	out: dict[Server, ServerGrants] = {}
	try:
		for name in bench.site_names():
			try:
				site = bench.site(name)
			except BenchError:
				continue
			db = SiteDatabase(site, connections)
			if db.postgres or db.server is None:
				continue  # PostgreSQL sites are read on their own logins
			entry = out.setdefault(db.server, ServerGrants(db.server, site, [], {}))
			try:
				if not db.has_btu_tables():
					continue
				tables = [table for table in READ_TABLES if table == "tabSingles" or db.has_table(table)]
			except DatabaseError as exc:
				entry.unread[name] = str(exc)
				continue
			entry.grants += [Grant(name, site.db_params["database"], table) for table in tables]
	finally:
		connections.close_idle(everything=True)
	return {server: entry for server, entry in out.items() if entry.grants or entry.unread}


def statements(login: ReaderLogin, grants: list[Grant], hosts=USER_HOSTS) -> list[str]:
	"""The SQL that makes the reader (or sets its password) and grants it `grants`, for each host."""
	out = []
	for host in hosts:
		who, password = account(login.user, host), text(login.password)
		out += [
			f"CREATE USER IF NOT EXISTS {who} IDENTIFIED BY {password}",
			f"ALTER USER {who} IDENTIFIED BY {password}",
		]
		out += [grant.sql(login.user, host) for grant in grants]
	return out


def apply(entry: ServerGrants, admin_user: str, admin_password: str, sql: list[str]) -> None:
	"""Run `sql` on the entry's server as its admin; raises pymysql's error."""
	import pymysql

	params = entry.site.db_params
	connection = pymysql.connect(
		host=params["host"],
		port=params["port"],
		unix_socket=params["socket"],
		user=admin_user,
		password=admin_password,
		connect_timeout=10,
		autocommit=True,
	)
	try:
		with connection.cursor() as cursor:
			for statement in sql:
				cursor.execute(statement)
	finally:
		connection.close()


def save_login(bench: Bench, login: ReaderLogin) -> Path:
	"""Write the login into common_site_config.json, keeping every other key; atomically, so that a scheduler reading it
	never sees half a file."""
	path = bench.sites_path / "common_site_config.json"
	config = json.loads(path.read_text()) if path.exists() else {}
	config[READER_USER_KEY] = login.user
	config[READER_PASSWORD_KEY] = login.password
	fd, temporary = tempfile.mkstemp(dir=path.parent, prefix=".common_site_config.")
	try:
		with os.fdopen(fd, "w") as out:
			json.dump(config, out, indent=1, sort_keys=True)
		if path.exists():
			os.chmod(temporary, path.stat().st_mode & 0o777)
		os.replace(temporary, path)
	except BaseException:
		if os.path.exists(temporary):
			os.unlink(temporary)
		raise
	return path
