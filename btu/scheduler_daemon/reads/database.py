"""Reading BTU rows from a site's database with parameterised SQL.

The scheduler only reads: schedule rows joined with their task and, to
resume after Redis lost its data, the newest logged slot per schedule,
each query a named method (the settings and checksums a reconcile reads
first are `site_settings`', Frappe's Scheduled Job Types
`sources.scheduled_job_types`'; which runs a table's rows are, `sources`'). MariaDB
goes through PyMySQL, PostgreSQL (db_type "postgres") through psycopg2, as
Frappe does.
"""

from __future__ import annotations

from datetime import date
from typing import Any

from btu.scheduler_daemon.reads.bench import Site
from btu.scheduler_daemon.reads.connections import Connections, PoolTimeout, Server
from btu.shared import run_requests, sealed
from btu.shared.schedule.row import SCHEDULER_FIELDS

SCHEDULE_TABLE = "tabBTU Task Schedule"
TASK_TABLE = "tabBTU Task"
LOG_TABLE = "tabBTU Task Log"
SKIPPED_TABLE = "tabBTU Skipped Slot"
CALENDAR_TABLE = "tabBTU Calendar"
CALENDAR_DATE_TABLE = "tabBTU Calendar Date"
REQUEST_TABLE = "tabBTU Run Request"
# ERPNext/HRMS's, when installed: a BTU Calendar may also exclude the dates of one Holiday List.
HOLIDAY_TABLE = "tabHoliday"
# Frappe's own, read as runs while a site has BTU fire its Scheduled Job Types (`sources.scheduled_job_types`).
JOB_TYPE_TABLE = "tabScheduled Job Type"

SCHEDULE_COLUMNS = SCHEDULER_FIELDS
# A run request's columns, and its schedule's that its job takes (queue, argument overrides).
REQUEST_COLUMNS = (
	"name",
	"modified",
	"task",
	"schedule",
	"slot_utc",
	"attempt",
	"run_at_utc",
	"origin",
	"method",
	"kwargs",
	"queue",
	"timeout",
)
REQUEST_SCHEDULE_COLUMNS = ("queue_name", "argument_overrides")
TASK_COLUMNS = ("function_string", "arguments", "queue_name", "max_task_duration", "desc_short", "max_concurrent_runs")
# What tells that a schedule changed, as (table alias, column): its row's stamp, enabled and paused
# (an UPDATE by SQL may change those without the stamp), its task's stamp and its calendar's.
VERSION_COLUMNS = (
	("s", "name"),
	("s", "modified"),
	("s", "enabled"),
	("s", "paused"),
	("t", "modified"),
	("c", "modified"),
)
VERSION_PREFIX = {"s": "", "t": "task_", "c": "calendar_"}
# The DocType each query alias reads: its sealed columns are read from the sealed table (btu.shared.sealed).
ALIAS_DOCTYPES = {"s": "BTU Task Schedule", "t": "BTU Task", "r": "BTU Run Request"}


# Every table the scheduler may read besides the schedule's joins: which a site has is read in one query.
KNOWN_TABLES = (SCHEDULE_TABLE, REQUEST_TABLE, JOB_TYPE_TABLE, HOLIDAY_TABLE, sealed.TABLE)


def is_missing_table(exc: BaseException) -> bool:
	"""MariaDB's ER_NO_SUCH_TABLE (1146), PostgreSQL's undefined_table (42P01)."""
	return getattr(exc, "pgcode", None) == "42P01" or (bool(getattr(exc, "args", None)) and exc.args[0] == 1146)


def _in(values) -> str:
	"""`IN (%s, ...)` with one placeholder per value."""
	return f"IN ({', '.join(['%s'] * len(values))})"


class DatabaseError(Exception):
	"""The site's database could not be reached or read; the message names the site."""


# In the config of the Site that stands for the bench's reader login (`server_read.ReaderLogin`).
READER_MARK = "btu_db_reader"


def connect(site: Site, connect_timeout: float = 5.0):
	"""A new autocommit connection to a site's database: PyMySQL for MariaDB, psycopg2 for Postgres, as Frappe uses."""
	params = site.db_params
	# The bench's reader login (`server_read`) reads many sites' databases by their names, so it opens none.
	if not params["database"] and not site.config.get(READER_MARK):
		raise DatabaseError(f"site {site.name}: site_config.json has no db_name")
	if site.db_type == "postgres":
		try:
			import psycopg2
		except ImportError as exc:
			raise DatabaseError(
				f"site {site.name}: db_type is postgres but psycopg2 is not installed: pip install psycopg2-binary"
			) from exc
		connection = psycopg2.connect(
			host=params["socket"] or params["host"],
			port=params["port"],
			user=params["user"],
			password=params["password"],
			dbname=params["database"],
			connect_timeout=int(connect_timeout),
		)
		connection.autocommit = True
		return connection
	import pymysql

	return pymysql.connect(
		host=params["host"],
		port=params["port"],
		unix_socket=params["socket"],
		user=params["user"],
		password=params["password"],
		database=params["database"] or None,
		charset="utf8mb4",
		connect_timeout=connect_timeout,
		read_timeout=30,
		write_timeout=30,
		autocommit=True,
		cursorclass=pymysql.cursors.DictCursor,
	)


class DatabaseBusy(DatabaseError):
	"""Every connection to the site's database server stayed busy for the whole wait: the site is not unreachable."""


class SiteDatabase:
	"""One site's reads, each on a connection of its server's bounded pool (`connections.Connections`)."""

	def __init__(self, site: Site, connections: Connections):
		self.site = site
		self.connections = connections
		self._tables: frozenset[str] | None = None  # which of KNOWN_TABLES the database has, as last read
		self.settings_queries: dict[tuple, tuple[str, tuple]] = {}  # site_settings.settings_sql's, by its shape

	@property
	def postgres(self) -> bool:
		return self.site.db_type == "postgres"

	@property
	def server(self) -> Server | None:
		"""The server whose connections the site shares; None if its config cannot say (its reads fail, naming why)."""
		try:
			return Server.of(self.site)
		except (TypeError, ValueError):
			return None

	def _quote(self, identifier: str) -> str:
		# Doubled quotes: a database name from a site's config is an identifier too.
		return '"' + identifier.replace('"', '""') + '"' if self.postgres else "`" + identifier.replace("`", "``") + "`"

	def _table(self, table: str, qualified: bool = False) -> str:
		"""`table` quoted; `qualified`: with its database's name, for a query that reads many sites' databases at once
		(`server_read`)."""
		return (
			f"{self._quote(self.site.db_params['database'])}.{self._quote(table)}" if qualified else self._quote(table)
		)

	def query(self, sql: str, params: tuple = ()) -> list[dict[str, Any]]:
		"""Run one read query; once more on a new connection if the one taken went away."""
		for attempt in (1, 2):
			try:
				with self.connections.pool(self.site).connection(self.site) as connection:
					cursor = connection.cursor()
					try:
						cursor.execute(sql, params)
						rows = cursor.fetchall()
						if self.postgres:
							columns = [column.name for column in cursor.description]
							rows = [dict(zip(columns, row)) for row in rows]
						return list(rows)
					finally:
						cursor.close()
			except DatabaseError:
				raise
			except PoolTimeout as exc:
				raise DatabaseBusy(
					f"site {self.site.name}: {exc}; raise db_max_connections, or look for slow queries on that server"
				) from None
			except Exception as exc:  # driver errors differ between PyMySQL and psycopg2
				if is_missing_table(exc):
					self._tables = None  # a table went (an uninstall): read which are left again
				if attempt == 2:
					raise DatabaseError(
						f"site {self.site.name}: {self.target()}: {exc}; check that the server runs and the site's "
						"db_host, db_port, db_name and db_password"
					) from exc
		raise AssertionError("unreachable")

	def target(self) -> str:
		"""Which database on which server, for messages; never raises (the config may be what is wrong)."""
		try:
			params = self.site.db_params
		except (TypeError, ValueError):
			return f"database {self.site.config.get('db_name')}"
		server = params["socket"] or f"{params['host']}:{params['port']}"
		return f"database {params['database']} at {server}"

	def _column(self, alias: str, column: str) -> str:
		"""`alias.column`, or the sealed value where the column is sealed and the site has the sealed table (a site
		not yet migrated to sealed values keeps them in the column)."""
		doctype = ALIAS_DOCTYPES.get(alias, "")
		if sealed.is_sealed(doctype, column) and self.has_table(sealed.TABLE):
			return sealed.value_sql(doctype, column, alias, self._quote)
		return f"{alias}.{self._quote(column)}"

	# -- what the scheduler reads ---------------------------------------------------

	def _schedules_sql(self, columns: str, qualified: bool = False) -> str:
		"""`SELECT columns` over every schedule row, joined with its task as `t` and its calendar as `c` (their columns
		NULL when gone or unset)."""
		q, t = self._quote, lambda table: self._table(table, qualified)
		return (
			f"SELECT {columns} FROM {t(SCHEDULE_TABLE)} s LEFT JOIN {t(TASK_TABLE)} t ON t.{q('name')} = s.{q('task')} "
			f"LEFT JOIN {t(CALENDAR_TABLE)} c ON c.{q('name')} = s.{q('calendar')}"
		)

	def _select_schedules(self, columns: str, names: list[str] | None) -> list[dict[str, Any]]:
		"""The rows of `_schedules_sql` named (every row when `names` is None)."""
		if names == []:
			return []
		q = self._quote
		sql = self._schedules_sql(columns)
		if names is None:
			return self.query(sql)
		return self.query(f"{sql} WHERE s.{q('name')} {_in(names)}", tuple(names))

	def _chunked(self, names: list[str], sql, extra: tuple = (), names_last: bool = False) -> list[dict[str, Any]]:
		"""Rows of `sql(chunk)` (SQL whose parameters are the chunk's names, then `extra`; `names_last`: `extra` first)
		for 1,000 names at a time."""
		rows: list[dict[str, Any]] = []
		for start in range(0, len(names), 1000):
			chunk = names[start : start + 1000]
			rows += self.query(sql(chunk), (*extra, *chunk) if names_last else (*chunk, *extra))
		return rows

	def has_table(self, table: str) -> bool:
		"""Whether the database has `table`: a table seen stays seen until a query finds it gone (an uninstall); one
		not seen is looked for again at each ask, so an install or a migrate that adds it is seen at once. The
		tables of KNOWN_TABLES are read together, one query for all."""
		if self._tables is None or table not in self._tables:
			if self.postgres:
				sql = (
					"SELECT table_name AS name FROM information_schema.tables "
					"WHERE table_schema = current_schema() AND table_name "
				)
			else:
				sql = (
					"SELECT table_name AS name FROM information_schema.tables "
					"WHERE table_schema = DATABASE() AND table_name "
				)
			wanted = tuple(dict.fromkeys((*KNOWN_TABLES, table)))
			self._tables = frozenset(
				row.get("name") or row.get("NAME") or row.get("TABLE_NAME")
				for row in self.query(sql + _in(wanted), wanted)
			)
		return table in self._tables

	def has_btu_tables(self) -> bool:
		return self.has_table(SCHEDULE_TABLE)

	def single_value(self, doctype: str, field: str) -> str | None:
		"""`frappe.db.get_single_value` as stored: the text in `tabSingles`, None when never saved."""
		rows = self.query(
			f"SELECT {self._quote('value')} AS value FROM {self._quote('tabSingles')} "
			"WHERE doctype = %s AND field = %s",
			(doctype, field),
		)
		return rows[0]["value"] if rows else None

	def schedule_versions(self, names: list[str] | None) -> list[dict[str, Any]]:
		"""Of each schedule row named (every row when `names` is None), what tells that it changed:
		`name`, `modified`, `enabled`, `paused`, its task's `task_modified` and its calendar's `calendar_modified`."""
		q = self._quote
		columns = ", ".join(
			f"{table}.{q(column)} AS {q(VERSION_PREFIX[table] + column)}" for table, column in VERSION_COLUMNS
		)
		return self._select_schedules(columns, names)

	def schedule_rows(self, names: list[str]) -> list[dict[str, Any]]:
		"""The schedule rows named, with their task's columns as `task_<column>` (None when the task is gone)."""
		q = self._quote
		columns = ", ".join(f"{self._column('s', column)} AS {q(column)}" for column in SCHEDULE_COLUMNS)
		task_columns = ", ".join(f"{self._column('t', column)} AS {q('task_' + column)}" for column in TASK_COLUMNS)
		return self._select_schedules(f"{columns}, t.{q('name')} AS {q('task_name')}, {task_columns}", names)

	def existing_schedules(self, names: list[str]) -> list[str]:
		"""Which of `names` are schedule rows."""
		return self._existing(SCHEDULE_TABLE, names)

	def _existing(self, table: str, names: list[str]) -> list[str]:
		q = self._quote
		rows = self._chunked(
			names, lambda chunk: f"SELECT {q('name')} AS name FROM {q(table)} WHERE {q('name')} {_in(chunk)}"
		)
		return [row["name"] for row in rows]

	# -- run requests ---------------------------------------------------------------

	def has_requests(self) -> bool:
		"""Whether the site has the run request table (a site not yet migrated to this BTU has none)."""
		return self.has_table(REQUEST_TABLE)

	def _requests_sql(self, columns: str, qualified: bool = False) -> tuple[str, tuple]:
		"""`SELECT columns` over every pending run request, joined with its task as `t` and its schedule as `s`, and its
		parameters."""
		q, t = self._quote, lambda table: self._table(table, qualified)
		return (
			f"SELECT {columns} FROM {t(REQUEST_TABLE)} r LEFT JOIN {t(TASK_TABLE)} t ON t.{q('name')} = r.{q('task')} "
			f"LEFT JOIN {t(SCHEDULE_TABLE)} s ON s.{q('name')} = r.{q('schedule')} WHERE r.{q('status')} = %s"
		), (run_requests.PENDING,)

	def _select_requests(self, columns: str, names: list[str] | None) -> list[dict[str, Any]]:
		"""The rows of `_requests_sql` named (all when `names` is None)."""
		if names == []:
			return []
		q = self._quote
		sql, params = self._requests_sql(columns)
		if names is None:
			return self.query(sql, params)
		return self._chunked(names, lambda chunk: f"{sql} AND r.{q('name')} {_in(chunk)}", params, names_last=True)

	def request_versions(self, names: list[str] | None) -> list[dict[str, Any]]:
		"""Of each pending run request named (all when `names` is None), what tells that it changed: `name`, `modified`,
		its task's `task_modified` and its schedule's `schedule_modified`."""
		q = self._quote
		return self._select_requests(
			f"r.{q('name')} AS {q('name')}, r.{q('modified')} AS {q('modified')}, "
			f"t.{q('modified')} AS {q('task_modified')}, s.{q('modified')} AS {q('schedule_modified')}",
			names,
		)

	def existing_requests(self, names: list[str]) -> list[str]:
		"""Which of `names` are run request rows, pending or not."""
		return self._existing(REQUEST_TABLE, names)

	def request_rows(self, names: list[str]) -> list[dict[str, Any]]:
		"""The pending run requests named, joined with their task (as `task_<column>`) and their schedule's queue and
		argument overrides."""
		q = self._quote
		columns = ", ".join(
			[f"{self._column('r', column)} AS {q(column)}" for column in REQUEST_COLUMNS]
			+ [f"{self._column('s', column)} AS {q(column)}" for column in REQUEST_SCHEDULE_COLUMNS]
			+ [f"t.{q('name')} AS {q('task_name')}"]
			+ [f"{self._column('t', column)} AS {q('task_' + column)}" for column in TASK_COLUMNS]
		)
		return self._select_requests(columns, names)

	def last_logged_slots(self, names: list[str]) -> dict[str, str]:
		"""Schedule -> newest `slot_utc` in its Task Logs (absent when it has none)."""
		q = self._quote
		rows = self._chunked(
			names,
			lambda chunk: (
				f"SELECT {q('schedule')} AS schedule, MAX({q('slot_utc')}) AS slot FROM {q(LOG_TABLE)} "
				f"WHERE {q('schedule')} {_in(chunk)} GROUP BY {q('schedule')}"
			),
		)
		return {row["schedule"]: row["slot"] for row in rows if row["slot"]}

	def skipped_slots(self, names: list[str]) -> dict[str, list[str]]:
		"""Schedule -> the slots skipped on request (UTC texts, as stored; absent when none)."""
		q = self._quote
		rows = self._chunked(
			names,
			lambda chunk: (
				f"SELECT {q('parent')} AS parent, {q('slot_utc')} AS slot FROM {q(SKIPPED_TABLE)} "
				f"WHERE {q('parenttype')} = 'BTU Task Schedule' AND {q('parent')} {_in(chunk)}"
			),
		)
		out: dict[str, list[str]] = {}
		for row in rows:
			out.setdefault(row["parent"], []).append(row["slot"])
		return out

	def calendar_dates(self, calendars: list[str], low: date, high: date) -> dict[str, set[date]]:
		"""Calendar -> its excluded dates from `low` to `high`: its own, and those of its Holiday List when
		the site has that table (ERPNext/HRMS); absent when none."""
		if not calendars:
			return {}
		q = self._quote
		out: dict[str, set[date]] = {}
		rows = self._chunked(
			calendars,
			lambda chunk: (
				f"SELECT {q('parent')} AS calendar, {q('date')} AS day FROM {q(CALENDAR_DATE_TABLE)} "
				f"WHERE {q('parenttype')} = 'BTU Calendar' AND {q('parent')} {_in(chunk)} "
				f"AND {q('date')} BETWEEN %s AND %s"
			),
			(low, high),
		)
		if self.has_table(HOLIDAY_TABLE):
			rows += self._chunked(
				calendars,
				lambda chunk: (
					f"SELECT c.{q('name')} AS calendar, h.{q('holiday_date')} AS day FROM {q(CALENDAR_TABLE)} c "
					f"JOIN {q(HOLIDAY_TABLE)} h ON h.{q('parent')} = c.{q('holiday_list')} "
					f"WHERE c.{q('name')} {_in(chunk)} AND h.{q('holiday_date')} BETWEEN %s AND %s"
				),
				(low, high),
			)
		for row in rows:
			if isinstance(row["day"], date):
				out.setdefault(row["calendar"], set()).add(
					row["day"] if type(row["day"]) is date else row["day"].date()
				)
		return out
