"""What a reconcile reads of many MariaDB sites in one query, through the bench's reader login.

A site's own login reaches only its own database, so reading the settings and checksums of a thousand
sites costs a thousand round trips, connection swaps and query parses: most of a full pass, and most of a
scheduler's idle CPU while its staggered cycle trickles through them. A reader login with SELECT on every
site's BTU tables reads up to BATCH_SITES sites in one UNION ALL per database server instead.
`btu-scheduler setup db-reader` prints or applies its grants; common_site_config.json names it
(READER_USER_KEY, READER_PASSWORD_KEY).

Which sites the reader may read is asked of the server itself (its privilege tables, every GRANTS_SECONDS).
Any other site is read on its own login as before (`site_reader.read_site`): one made since the grants, one
whose tables are not known yet, a site on PostgreSQL (its databases cannot be joined in one query), and
every site when no reader is set. A batch the server refuses or fails is read so too, site by site, so a
wrong grant costs speed, never a site.
"""

from __future__ import annotations

import logging
import re
import threading
import time
from dataclasses import dataclass, field

from pymysql.converters import escape_string

from btu.scheduler_daemon.log import log_event
from btu.scheduler_daemon.reads.bench import Site
from btu.scheduler_daemon.reads.connections import Connections, Server
from btu.scheduler_daemon.reads.database import (
	CALENDAR_TABLE,
	JOB_TYPE_TABLE,
	KNOWN_TABLES,
	READER_MARK,
	REQUEST_TABLE,
	SCHEDULE_TABLE,
	TASK_TABLE,
	DatabaseError,
	SiteDatabase,
)
from btu.scheduler_daemon.reads.site_settings import SiteSettings, settings_row, settings_sql, summaries_of

logger = logging.getLogger("btu.scheduler")

READER_USER_KEY = "btu_db_reader_user"
READER_PASSWORD_KEY = "btu_db_reader_password"
# Sites per query: big enough that a pass over 1,000 sites is a handful of round trips, small enough that one
# query's tables fit MariaDB's default table_open_cache (2,000) with room for Frappe's.
BATCH_SITES = 100
GRANTS_SECONDS = 300.0
SINGLES_TABLE = "tabSingles"
# What every site's batched read selects from; the run request table and Frappe's Scheduled Job Types as the site has
# them.
READ_TABLES = (SINGLES_TABLE, SCHEDULE_TABLE, TASK_TABLE, CALENDAR_TABLE, REQUEST_TABLE, JOB_TYPE_TABLE)
# The reader's SELECT grants, as the server lists them: global, per database (a LIKE pattern) and per table.
GRANTS_SQL = """
SELECT 'global' AS level, NULL AS db, NULL AS tbl FROM information_schema.USER_PRIVILEGES
	WHERE GRANTEE = {grantee} AND PRIVILEGE_TYPE = 'SELECT'
UNION ALL SELECT 'database', TABLE_SCHEMA, NULL FROM information_schema.SCHEMA_PRIVILEGES
	WHERE GRANTEE = {grantee} AND PRIVILEGE_TYPE = 'SELECT'
UNION ALL SELECT 'table', TABLE_SCHEMA, TABLE_NAME FROM information_schema.TABLE_PRIVILEGES
	WHERE GRANTEE = {grantee} AND PRIVILEGE_TYPE = 'SELECT'
""".format(
	grantee=(
		"CONCAT('''', SUBSTRING_INDEX(CURRENT_USER(), '@', 1), '''@''', SUBSTRING_INDEX(CURRENT_USER(), '@', -1), '''')"
	)
)


@dataclass(frozen=True)
class ReaderLogin:
	"""The bench's reader login, as common_site_config.json names it."""

	user: str
	password: str

	@classmethod
	def of(cls, common_config: dict) -> ReaderLogin | None:
		user = common_config.get(READER_USER_KEY)
		if not isinstance(user, str) or not user.strip():
			return None
		return cls(user.strip(), str(common_config.get(READER_PASSWORD_KEY) or ""))

	def on_server_of(self, site: Site) -> Site:
		"""The reader as a Site on `site`'s server with no database: the pools and `connect` take it as any site."""
		config = {key: site.config.get(key) for key in ("db_type", "db_host", "db_port", "db_socket")}
		config.update(db_user=self.user, db_password=self.password, db_name="", **{READER_MARK: True})
		return Site(f"db reader {self.user!r}", site.path, config)


@dataclass(frozen=True)
class Grants:
	"""Which tables the reader may SELECT on one server."""

	everything: bool = False
	databases: tuple[re.Pattern, ...] = ()
	tables: frozenset[tuple[str, str]] = frozenset()

	@classmethod
	def of(cls, rows: list[dict]) -> Grants:
		return cls(
			everything=any(row["level"] == "global" for row in rows),
			databases=tuple(like_pattern(row["db"]) for row in rows if row["level"] == "database"),
			tables=frozenset((row["db"], row["tbl"]) for row in rows if row["level"] == "table"),
		)

	def may_read(self, database: str, tables) -> bool:
		if self.everything or any(pattern.fullmatch(database) for pattern in self.databases):
			return True
		return all((database, table) in self.tables for table in tables)


def like_pattern(pattern: str) -> re.Pattern:
	"""A grant's database name as MariaDB matches it: `%` and `_` are wildcards unless escaped with a backslash."""
	out, escaped = [], False
	for char in pattern:
		if escaped:
			out.append(re.escape(char))
			escaped = False
		elif char == "\\":
			escaped = True
		else:
			out.append(".*" if char == "%" else "." if char == "_" else re.escape(char))
	return re.compile("".join(out))


@dataclass
class ServerGrants:
	grants: Grants = field(default_factory=Grants)
	until: float = 0.0  # monotonic: read again after this


class ServerReader:
	"""Reads the settings of many sites of one MariaDB server in one query, through the reader login."""

	def __init__(self, login: ReaderLogin, connections: Connections):
		self.login = login
		self.connections = connections
		self.grants: dict[Server, ServerGrants] = {}
		self.refused: set[tuple[Server, str]] = set()  # (server, error) logged once
		self.selects: dict[str, tuple[tuple, str]] = {}  # site -> (its shape, its part of a batch: `select_of`)
		self.lock = threading.Lock()

	def batches(
		self, dbs: list[SiteDatabase], scheduled_jobs: dict[str, bool]
	) -> tuple[list[list[SiteDatabase]], list[SiteDatabase]]:
		"""Split `dbs` into batches of one server the reader may read, and the sites read on their own logins."""
		self.discover([db for db in dbs if db._tables is None and not db.postgres and db.server is not None])
		by_server: dict[Server, list[SiteDatabase]] = {}
		alone = []
		for db in dbs:
			tables = self.tables_of(db, scheduled_jobs.get(db.site.name, False))
			if tables is None:
				alone.append(db)
			else:
				by_server.setdefault(db.server, []).append(db)
		batches = []
		for server, members in by_server.items():
			grants = self.grants_on(server, members[0])
			readable = [
				db
				for db in members
				if grants is not None
				and grants.may_read(
					db.site.db_params["database"], self.tables_of(db, scheduled_jobs.get(db.site.name, False))
				)
			]
			alone += [db for db in members if db not in readable]
			batches += [readable[start : start + BATCH_SITES] for start in range(0, len(readable), BATCH_SITES)]
		return batches, alone

	@staticmethod
	def tables_of(db: SiteDatabase, scheduled_jobs: bool) -> tuple[str, ...] | None:
		"""The tables a batched read of the site selects from; None when it is read on its own login (PostgreSQL, its
		tables not known yet or some missing: the own login looks for them again at each read)."""
		known = db._tables
		if db.postgres or db.server is None or known is None:
			return None
		wanted = (SCHEDULE_TABLE, REQUEST_TABLE, *((JOB_TYPE_TABLE,) if scheduled_jobs else ()))
		if not all(table in known for table in wanted):
			return None
		return (SINGLES_TABLE, TASK_TABLE, CALENDAR_TABLE, *wanted)

	def discover(self, dbs: list[SiteDatabase]) -> None:
		"""Which tables sites whose tables are not known yet have (a cold start), a query per server: what the reader
		sees is there. It sees only the tables granted to it, so a site it sees no schedule table of is left unknown,
		for its own login to look (`SiteDatabase.has_table`), as is any table it does not see."""
		by_server: dict[Server, list[SiteDatabase]] = {}
		for db in dbs:
			by_server.setdefault(db.server, []).append(db)
		for server, members in by_server.items():
			names = {db.site.db_params["database"]: db for db in members}
			listed = ", ".join(["%s"] * len(names))
			wanted = ", ".join(["%s"] * len(KNOWN_TABLES))
			try:
				rows = self.reader_on(members[0]).query(
					"SELECT TABLE_SCHEMA AS db, TABLE_NAME AS tbl FROM information_schema.TABLES "
					f"WHERE TABLE_SCHEMA IN ({listed}) AND TABLE_NAME IN ({wanted})",
					(*names, *KNOWN_TABLES),
				)
			except DatabaseError as exc:
				self.refused_once(server, exc)
				continue
			seen: dict[str, set[str]] = {}
			for row in rows:
				seen.setdefault(row["db"], set()).add(row["tbl"])
			for database, tables in seen.items():
				if SCHEDULE_TABLE in tables and names[database]._tables is None:
					names[database]._tables = frozenset(tables)

	def grants_on(self, server: Server, any_site: SiteDatabase) -> Grants | None:
		"""The reader's grants on `server`, read again every GRANTS_SECONDS; None when it cannot log in there."""
		with self.lock:
			known = self.grants.get(server)
			if known is not None and time.monotonic() < known.until:
				return known.grants
		try:
			grants = Grants.of(self.reader_on(any_site).query(GRANTS_SQL))
		except DatabaseError as exc:
			self.refused_once(server, exc)
			grants = None
		with self.lock:
			self.grants[server] = ServerGrants(grants or Grants(), time.monotonic() + GRANTS_SECONDS)
		return grants

	def reader_on(self, db: SiteDatabase) -> SiteDatabase:
		return SiteDatabase(self.login.on_server_of(db.site), self.connections)

	def read(self, batch: list[SiteDatabase], scheduled_jobs: dict[str, bool]) -> dict[str, SiteSettings] | None:
		"""Each site's `site_settings.read` with its checksum, in one query; None if the server refused or failed it."""
		selects = [self.select_of(db, scheduled_jobs.get(db.site.name, False)) for db in batch]
		try:
			rows = self.reader_on(batch[0]).query(" UNION ALL ".join(selects))
		except DatabaseError as exc:
			self.refused_once(batch[0].server, exc)
			with self.lock:  # the grants may have changed: read them again before the next batch
				self.grants.pop(batch[0].server, None)
			return None
		by_site: dict[str, list[dict]] = {}
		for row in rows:
			by_site.setdefault(row["site"], []).append(row)
		return {
			site: SiteSettings.of(row, summaries_of(row))
			for site, row in ((site, settings_row(part_rows)) for site, part_rows in by_site.items())
		}

	def select_of(self, db: SiteDatabase, scheduled_jobs: bool) -> str:
		"""The site's part of a batch: its settings query, named by a `site` column, with its values written in (escaped
		once, when the site's shape changes, not at every read: the reads of a thousand sites are each second's
		work)."""
		shape = (db, scheduled_jobs, db._tables)
		made = self.selects.get(db.site.name)
		if made is None or made[0] != shape:
			sql, params = settings_sql(db, checksum=True, scheduled_jobs=scheduled_jobs, qualified=True, cached=True)
			text = sql % tuple(sql_text(value) for value in params)  # each part's row names the site (`qualified`)
			made = self.selects[db.site.name] = (shape, text)
		return made[1]

	def refused_once(self, server: Server, exc: DatabaseError) -> None:
		key = (server, str(exc.__cause__ or exc))
		with self.lock:
			if key in self.refused:
				return
			self.refused.add(key)
		log_event(
			logger,
			logging.WARNING,
			"db_reader_refused",
			server=str(server),
			user=self.login.user,
			error=str(exc.__cause__ or exc),
			effect=(
				"those sites are read on their own logins (slower, nothing lost); "
				"run btu-scheduler setup db-reader --apply"
			),
		)


def sql_text(value: str) -> str:
	"""A value as a MariaDB string literal. The values are site names and BTU's constants, with no quote or backslash,
	so the literal reads the same whatever the server's sql_mode."""
	return "'" + escape_string(str(value)) + "'"


def reader_for(common_config: dict, connections: Connections, current: ServerReader | None) -> ServerReader | None:
	"""The bench's reader as common_site_config.json names it now: `current` kept while its login is unchanged."""
	login = ReaderLogin.of(common_config)
	if login is None:
		return None
	if current is not None and current.login == login:
		return current
	return ServerReader(login, connections)
