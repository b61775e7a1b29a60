"""What a reconcile reads of a site before its rows, in one query: the values of tabSingles the scheduler obeys, and
the summary (row count and checksum) of what fires, computed by the database.

Functions of a `SiteDatabase` (its connection, quoting and which tables it has), as `sources.scheduled_job_types` is;
the query's text is made once per shape (`SiteDatabase.settings_sql`), since a reader's batch (`server_read`) asks for
every site's each second.
"""

from __future__ import annotations

from dataclasses import dataclass

from btu.scheduler_daemon.reads.database import JOB_TYPE_TABLE, REQUEST_TABLE, VERSION_COLUMNS, SiteDatabase, _in
from btu.scheduler_daemon.reads.sources import scheduled_job_types

# What `read` reads of tabSingles, as (alias, doctype, field).
SETTINGS_SINGLES = (
	("time_zone", "System Settings", "time_zone"),
	("btu_enabled", "BTU Configuration", "enabled"),
	("fire_frappe_jobs", "BTU Configuration", "fire_frappe_jobs"),
	("enable_scheduler", "System Settings", "enable_scheduler"),
)


# The parts of a site's summary: x its schedules, r its pending run requests, j its Scheduled Job Types.
SUMMARY_PARTS = ("x", "r", "j")


@dataclass(frozen=True)
class SiteSettings:
	"""What a reconcile reads of a site before its rows, in one round trip (`site_settings.read`)."""

	time_zone: str | None  # System Settings.time_zone; None when unset (Frappe's default zone applies)
	btu_enabled: bool  # BTU Configuration.enabled; a site that never saved the configuration is enabled
	fire_frappe_jobs: bool  # BTU Configuration.fire_frappe_jobs (off when never saved)
	scheduler_enabled: (
		bool  # System Settings.enable_scheduler, as Frappe's is_scheduler_disabled reads it (unset: disabled)
	)
	summaries: (
		dict[str, tuple[int, str]] | None
	)  # part -> (row count, checksum): x schedules, r run requests, j Scheduled Job Types

	@classmethod
	def of(cls, row: dict, summaries: dict | None) -> SiteSettings:
		enabled = row.get("btu_enabled")
		return cls(
			time_zone=row.get("time_zone") or None,
			btu_enabled=enabled is None or str(enabled).strip() not in ("0", ""),
			fire_frappe_jobs=str(row.get("fire_frappe_jobs") or "0").strip() not in ("0", ""),
			scheduler_enabled=truthy_number(row.get("enable_scheduler")),
			summaries=summaries,
		)

	def summary(self, scheduled_jobs_on: bool) -> tuple[int, str]:
		"""(row count, checksum) of everything that fires: the Scheduled Job Types' part only when BTU fires them."""
		parts = [summary for part, summary in (self.summaries or {}).items() if part != "j" or scheduled_jobs_on]
		return (sum(count for count, _ in parts), "|".join(checksum for _, checksum in parts))


def summaries_of(row: dict) -> dict[str, tuple[int, str]]:
	"""The (row count, checksum) of each part `SiteDatabase.settings_sql` read (a part the site lacks is NULL)."""
	return {
		part: (int(row[f"{part}_n"]), str(row[f"{part}_checksum"]))
		for part in SUMMARY_PARTS
		if row.get(f"{part}_n") is not None
	}


def truthy_number(value) -> bool:
	try:
		return bool(int(float(str(value or "0").strip())))
	except ValueError:
		return False


def read(db: SiteDatabase, *, checksum: bool, scheduled_jobs: bool) -> SiteSettings | None:
	"""The site's settings the scheduler reads (and with `checksum`, the summary of its schedule rows,
	`table_summary`'s) in one round trip; None when the site has no BTU tables. `scheduled_jobs`: whether
	to sum the Scheduled Job Types too (their part counts only when BTU fires them)."""
	if not db.has_btu_tables():
		return None
	sql, params = settings_sql(db, checksum=checksum, scheduled_jobs=scheduled_jobs)
	row = settings_row(db.query(sql, params))
	return SiteSettings.of(row, summaries_of(row) if checksum else None)


def settings_row(rows: list[dict]) -> dict:
	"""The rows of one site's `settings_sql` (one a part) as one row: the singles' values and each part's `<part>_n`
	and `<part>_checksum` (None for a part the site lacks)."""
	row: dict = {f"{part}_{column}": None for part in SUMMARY_PARTS for column in ("n", "checksum")}
	for part_row in rows:
		part = part_row["part"]
		if part == "g":
			row.update({alias: part_row[alias] for alias, _, _ in SETTINGS_SINGLES})
		else:
			row[f"{part}_n"], row[f"{part}_checksum"] = part_row["n"], part_row["checksum"]
	return row


def settings_sql(
	db: SiteDatabase, *, checksum: bool, scheduled_jobs: bool, qualified: bool = False, cached: bool = False
) -> tuple[str, tuple]:
	"""`read`'s query and its parameters: a row a part (`settings_row` makes them one), its `part` column "g" for the
	singles, and with `checksum` one for each of SUMMARY_PARTS the site has, with its `n` and `checksum` (the same
	columns in each, so that `server_read` can join many sites' rows in one UNION ALL). `qualified`: tables named with
	their database, and each row with the site's name as `site`; `cached`: which tables the site has as last read,
	without asking (`has_table` asks again for one not seen). Made once per shape: a reader's batch asks for every
	site's each second."""
	if not cached and checksum:
		# Looked for again while not seen, as before a shape is picked: a migrate that adds one is seen at once.
		db.has_table(REQUEST_TABLE)
		if scheduled_jobs:
			db.has_table(JOB_TYPE_TABLE)
	key = (checksum, scheduled_jobs, qualified, db._tables)
	made = db.settings_queries.get(key)
	if made is None:
		made = db.settings_queries[key] = make_settings_sql(db, checksum, scheduled_jobs, qualified)
	return made


def make_settings_sql(db: SiteDatabase, checksum: bool, scheduled_jobs: bool, qualified: bool) -> tuple[str, tuple]:
	"""Each part a SELECT of its own, joined by UNION ALL, never a derived table: MariaDB materialises a derived table
	with an aggregate in a temporary table, and one with tabSingles' `value` (LONGTEXT) on disk, which was most of
	what a full pass cost the server (about 1 ms of its CPU a site: "The full pass's query" in docs/PERFORMANCE.md)."""
	has_table = lambda table: table in (db._tables or ())  # noqa: E731
	q = db._quote
	params: list = []

	def lead(part: str) -> str:
		"""A row's first columns: the site's name when many sites are read in one query, and its part."""
		if qualified:
			params.append(db.site.name)
		return f"{'%s AS site, ' if qualified else ''}'{part}' AS part"

	# One read of tabSingles for every value (a table read once is one table the server opens, not four).
	picked = ", ".join(
		f"MAX(CASE WHEN {q('doctype')} = %s AND {q('field')} = %s THEN {q('value')} END) AS {q(alias)}"
		for alias, _, _ in SETTINGS_SINGLES
	)
	doctypes = tuple(dict.fromkeys(doctype for _, doctype, _ in SETTINGS_SINGLES))
	summary = ", NULL AS n, NULL AS checksum" if checksum else ""
	selects = [
		f"SELECT {lead('g')}{summary}, {picked} FROM {db._table('tabSingles', qualified)} "
		f"WHERE {q('doctype')} {_in(doctypes)}"
	]
	params += [*(value for _, doctype, field in SETTINGS_SINGLES for value in (doctype, field)), *doctypes]
	if not checksum:
		return selects[0], tuple(params)
	# A part's row: its summary, then NULL for each of the singles' columns.
	nulls = ", NULL" * len(SETTINGS_SINGLES)
	selects.append(db._schedules_sql(f"{lead('x')}, {checksum_columns(db, 'schedules')}{nulls}", qualified))
	if has_table(REQUEST_TABLE):
		sql, extra = db._requests_sql(f"{lead('r')}, {checksum_columns(db, 'requests')}{nulls}", qualified)
		selects.append(sql)
		params += extra
	if scheduled_jobs and has_table(JOB_TYPE_TABLE):
		selects.append(scheduled_job_types.summary_sql(db, qualified, lead=f"{lead('j')}, ", trail=nulls))
	return " UNION ALL ".join(selects), tuple(params)


def checksum_columns(db: SiteDatabase, part: str) -> str:
	"""`n` and `checksum` of a summary, computed by the database over the columns whose change `row_versions` reads:
	equal summaries mean no schedule row (nor its task or calendar) or pending run request changed."""
	q = db._quote
	crc = "hashtext" if db.postgres else "CRC32"
	if part == "schedules":
		columns = ", ".join(f"{table}.{q(column)}" for table, column in VERSION_COLUMNS)
	else:
		columns = f"r.{q('name')}, r.{q('modified')}, t.{q('modified')}, s.{q('modified')}"
	return f"COUNT(*) AS n, SUM({crc}(CONCAT_WS('|', {columns}))) AS checksum"
