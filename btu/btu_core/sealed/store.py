"""The sealed values' table: made, read, written and cleared by SQL, in the caller's transaction."""

from __future__ import annotations

from collections.abc import Iterable, Mapping

import frappe

from btu.btu_core.sealed.copies import hide_in_existing_versions
from btu.shared.sealed import FIELDS, MARIADB_DDL, POSTGRES_DDL, TABLE


def postgres() -> bool:
	return frappe.db.db_type == "postgres"


def ensure_table() -> None:
	"""Make the table where it is missing (install, and every migrate: a restore may predate it)."""
	frappe.db.sql_ddl(POSTGRES_DDL if postgres() else MARIADB_DDL)


def seal_stray_values() -> None:
	"""after_migrate: the table made where missing; every value found in a sealed field's own column (an older BTU's,
	a restore's, a script's `frappe.db.set_value`) moved into it; the values of rows deleted by SQL cleared; and the
	Versions an older BTU left, hidden as new ones are."""
	ensure_table()
	for doctype in FIELDS:
		seal_columns(doctype)
		forget_orphans(doctype)
	hide_in_existing_versions()
	frappe.db.commit()


def read(doctype: str, names: Iterable[str]) -> dict[str, dict[str, str]]:
	"""The sealed values of the `doctype` rows named: {name: {field: value}} (a field never set is absent)."""
	names = list(dict.fromkeys(names))
	if not names:
		return {}
	found: dict[str, dict[str, str]] = {}
	for start in range(0, len(names), 1000):
		chunk = names[start : start + 1000]
		rows = frappe.db.sql(
			f"select name, fieldname, value from `{TABLE}` where doctype = %s and name {_in(chunk)}",
			(doctype, *chunk),
		)
		for name, field, value in rows:
			found.setdefault(name, {})[field] = value
	return found


def write(doctype: str, name: str, values: Mapping[str, object], *, keep_existing: bool = False) -> None:
	"""Store `values` ({field: value} of FIELDS[doctype]) for the row `name`: an empty value removes the field's.
	`keep_existing`: a value already stored stays (an insert that may have found its row there)."""
	unknown = set(values) - set(FIELDS[doctype])
	if unknown:
		raise ValueError(f"{doctype} seals {', '.join(FIELDS[doctype])}, not {', '.join(sorted(unknown))}")
	kept = [(field, str(value)) for field, value in values.items() if value not in (None, "")]
	cleared = [field for field, value in values.items() if value in (None, "")]
	if cleared and not keep_existing:
		frappe.db.sql(
			f"delete from `{TABLE}` where doctype = %s and name = %s and fieldname {_in(cleared)}",
			(doctype, name, *cleared),
		)
	if kept:
		rows = ", ".join(["(%s, %s, %s, %s)"] * len(kept))
		frappe.db.sql(
			f"insert into `{TABLE}` (doctype, name, fieldname, value) values {rows} "
			+ (_keep() if keep_existing else _upsert()),
			[item for field, value in kept for item in (doctype, name, field, value)],
		)


def forget(doctype: str, name: str) -> None:
	frappe.db.sql(f"delete from `{TABLE}` where doctype = %s and name = %s", (doctype, name))


def rename(doctype: str, old: str, new: str) -> None:
	frappe.db.sql(f"update `{TABLE}` set name = %s where doctype = %s and name = %s", (new, doctype, old))


def forget_orphans(doctype: str) -> int:
	"""Remove the values of `doctype` rows that are gone (deleted by SQL: retention, an uninstall); how many."""
	orphans = frappe.db.sql(
		f"select distinct v.name from `{TABLE}` v left join `tab{doctype}` t on t.name = v.name "
		"where v.doctype = %s and t.name is null",
		doctype,
	)
	for start in range(0, len(orphans), 1000):
		chunk = [row[0] for row in orphans[start : start + 1000]]
		frappe.db.sql(
			f"delete from `{TABLE}` where doctype = %s and name {_in(chunk)}",
			(doctype, *chunk),
		)
	return len(orphans)


def seal_columns(doctype: str) -> int:
	"""Move the values in `doctype`'s own columns here and empty the columns, one statement per field whatever the
	rows; how many values."""
	table = f"tab{doctype}"
	moved = 0
	# One scan of the table tells whether any column holds one (most migrates find none).
	anywhere = " or ".join(f"coalesce(`{field}`, '') != ''" for field in FIELDS[doctype])
	if not frappe.db.sql(f"select 1 from `{table}` where {anywhere} limit 1"):
		return 0
	for field in FIELDS[doctype]:
		found = f"from `{table}` where coalesce(`{field}`, '') != ''"
		count = frappe.db.sql(f"select count(*) {found}")[0][0]
		if count:
			frappe.db.sql(
				f"insert into `{TABLE}` (doctype, name, fieldname, value) select %s, name, %s, `{field}` {found} "
				+ _upsert(),
				(doctype, field),
			)
			frappe.db.sql(f"update `{table}` set `{field}` = null where coalesce(`{field}`, '') != ''")
		moved += count
	return moved


def _in(values) -> str:
	return f"in ({', '.join(['%s'] * len(values))})"


def _keep() -> str:
	if postgres():
		return "on conflict (doctype, name, fieldname) do nothing"
	return "on duplicate key update value = value"


def _upsert() -> str:
	if postgres():
		return "on conflict (doctype, name, fieldname) do update set value = excluded.value"
	return "on duplicate key update value = values(value)"
