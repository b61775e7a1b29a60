"""Compare dev-bench tables with the tables Frappe itself creates for BTU's DocType JSON.

Run with a real bench's Python, from anywhere:

	~/frappe-bench/env/bin/python scripts/compare_schema.py [--bench ~/frappe-bench] [--site SITE]

Frappe's own `MariaDBTable` builds the CREATE TABLE for each non-Single BTU
DocType (its DDL is captured, not run on the site: the site is only read),
and the statements run in a scratch database; where the site already has the
table (BTU installed), the site's own table is compared instead. A dev bench is made beside it,
and information_schema (columns in order with type, NULL, default and key;
indexes; engine, row format, collation) is compared table by table. Both the
scratch database and the dev bench are dropped afterwards. Exit 0 when all
tables are identical, 1 otherwise.
"""

from __future__ import annotations

import argparse
import json
import os
import secrets
import sys
import tempfile
from pathlib import Path

import pymysql

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from devbench.bench import create_dev_bench, drop_dev_bench  # noqa: E402
from devbench.schema import DOCTYPE_DIR, load_doctypes  # noqa: E402


def frappe_ddl(bench: Path, site: str) -> dict[str, str | None]:
	"""Table -> the CREATE TABLE Frappe's MariaDBTable issues for it; None when the site already has it."""
	import frappe
	from frappe.database.mariadb.schema import MariaDBTable
	from frappe.model.meta import Meta

	os.chdir(bench / "sites")
	frappe.init(site=site, sites_path=".")
	frappe.connect()
	captured: list[str] = []
	frappe.db.sql_ddl = lambda query, *args, **kwargs: captured.append(query)
	statements = {}
	try:
		for schema in load_doctypes(DOCTYPE_DIR).values():
			if schema.issingle:
				continue
			captured.clear()
			MariaDBTable(schema.name, Meta(frappe.get_doc(dict(schema.meta)))).sync()
			creates = [q for q in captured if q.lstrip().lower().startswith("create table")]
			statements[schema.table] = creates[0] if creates else None
	finally:
		frappe.destroy()
	return statements


def describe(cur, database: str, table: str) -> tuple:
	cur.execute(
		"SELECT ORDINAL_POSITION, COLUMN_NAME, COLUMN_TYPE, IS_NULLABLE, COLUMN_DEFAULT, COLUMN_KEY "
		"FROM information_schema.COLUMNS WHERE TABLE_SCHEMA=%s AND TABLE_NAME=%s ORDER BY 1",
		(database, table),
	)
	columns = cur.fetchall()
	cur.execute(
		"SELECT INDEX_NAME, SEQ_IN_INDEX, COLUMN_NAME, NON_UNIQUE FROM information_schema.STATISTICS "
		"WHERE TABLE_SCHEMA=%s AND TABLE_NAME=%s ORDER BY 1, 2",
		(database, table),
	)
	indexes = cur.fetchall()
	cur.execute(
		"SELECT ENGINE, ROW_FORMAT, TABLE_COLLATION FROM information_schema.TABLES "
		"WHERE TABLE_SCHEMA=%s AND TABLE_NAME=%s",
		(database, table),
	)
	return columns, indexes, cur.fetchall()


def main() -> int:
	parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
	parser.add_argument("--bench", default=os.path.expanduser("~/frappe-bench"))
	parser.add_argument("--site", help="a site of that bench (default: its first)")
	args = parser.parse_args()
	bench = Path(args.bench).resolve()
	site = args.site or sorted(p.parent.name for p in (bench / "sites").glob("*/site_config.json"))[0]
	common = json.loads((bench / "sites" / "common_site_config.json").read_text())
	db = {"db_host": common.get("db_host") or "127.0.0.1", "db_port": int(common.get("db_port") or 3306)}
	statements = frappe_ddl(bench, site)

	root = pymysql.connect(host=db["db_host"], port=db["db_port"], user="root", password="", autocommit=True)
	scratch = "_btucmp" + secrets.token_hex(4)
	dev_path = Path(tempfile.mkdtemp(prefix="btu-compare-")) / "bench"
	different = 0
	try:
		dev_db = create_dev_bench(dev_path, **db).site("site1.localhost").config["db_name"]
		site_db = json.loads((bench / "sites" / site / "site_config.json").read_text())["db_name"]
		with root.cursor() as cur:
			cur.execute(f"CREATE DATABASE `{scratch}` CHARACTER SET utf8mb4 COLLATE utf8mb4_unicode_ci")
			cur.execute(f"USE `{scratch}`")
			for statement in filter(None, statements.values()):
				cur.execute(statement)
			for table, statement in statements.items():
				# A site with BTU installed: compare with the table Frappe really made there.
				frappe_side = describe(cur, scratch if statement else site_db, table)
				dev_side = describe(cur, dev_db, table)
				same = frappe_side == dev_side
				different += not same
				print(
					f"{table}: {'identical' if same else 'DIFFERENT'} "
					f"({len(frappe_side[0])} columns, {len(frappe_side[1])} index entries)"
				)
				for label, ours, theirs in zip(("columns", "indexes", "options"), dev_side, frappe_side):
					if ours != theirs:
						print(f"  {label}\n    frappe:    {theirs}\n    dev bench: {ours}")
	finally:
		with root.cursor() as cur:
			cur.execute(f"DROP DATABASE IF EXISTS `{scratch}`")
		root.close()
		drop_dev_bench(dev_path)
	import frappe

	print(
		f"compared with Frappe {frappe.__version__} (bench {bench}, site {site}): "
		f"{len(statements) - different}/{len(statements)} tables identical"
	)
	return 1 if different else 0


if __name__ == "__main__":
	sys.exit(main())
