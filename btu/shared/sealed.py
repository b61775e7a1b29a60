"""Sealed values: what a run is given and what it left, kept where no generic Frappe endpoint reaches.

A Task's `arguments`, a Schedule's `argument_overrides`, a Run Request's `kwargs` and a Log's return value,
output and traceback may hold anything the function touched. Frappe filters and counts every column of a
DocType's table for whoever calls `get_count` (v15 checks no permission there), `get_list`, report view, group-by
counts or `/api/resource`, whatever the field's permlevel or the row's permission: a `like` filter reads a column
one character at a time. So these values live in TABLE, a table no DocType names (as Frappe keeps passwords in
`__Auth`), one row per (doctype, name, field); the DocType's own column stays NULL. A Document loads them for a
reader its permissions let in (btu/btu_core/sealed/), the run path and the scheduler read them by SQL with
`value_sql`. See docs/SECURITY.md, "Nothing learnable by filter or count".
"""

from __future__ import annotations

TABLE = "__btu_sealed"
FIELDS: dict[str, tuple[str, ...]] = {
	"BTU Task": ("arguments",),
	"BTU Task Schedule": ("argument_overrides",),
	"BTU Run Request": ("kwargs",),
	"BTU Task Log": ("result_message", "stdout", "stderr", "traceback", "logging_output"),
}


# As BTU's install and every migrate make it (btu/btu_core/sealed/store.py); the dev bench makes it too.
MARIADB_DDL = f"""create table if not exists `{TABLE}` (
	`doctype` varchar(140) not null,
	`name` varchar(140) not null,
	`fieldname` varchar(140) not null,
	`value` longtext,
	primary key (`doctype`, `name`, `fieldname`)
) engine=InnoDB row_format=dynamic character set=utf8mb4 collate=utf8mb4_unicode_ci"""
POSTGRES_DDL = f"""create table if not exists "{TABLE}" (
	"doctype" varchar(140) not null,
	"name" varchar(140) not null,
	"fieldname" varchar(140) not null,
	"value" text,
	primary key ("doctype", "name", "fieldname")
)"""


def is_sealed(doctype: str, field: str) -> bool:
	return field in FIELDS.get(doctype, ())


def value_sql(doctype: str, field: str, alias: str, quote=lambda name: f"`{name}`", table: str | None = None) -> str:
	"""An SQL expression for `field` of the `doctype` row aliased `alias`: what its own column holds when something
	wrote it there by SQL (an older BTU, a script's `frappe.db.set_value`: the next migrate seals it), else its sealed
	value. `quote` quotes an identifier in the database's dialect; `table` is TABLE as the query names it (qualified
	by its database when a query reads several)."""
	if not is_sealed(doctype, field):
		raise ValueError(f"{doctype}.{field} is not sealed")
	sealed = table or quote(TABLE)
	# doctype and field are this module's constants, never input: inlined, so the expression needs no parameters.
	return (
		f"COALESCE(NULLIF({alias}.{quote(field)}, ''), (SELECT v.{quote('value')} FROM {sealed} v "
		f"WHERE v.{quote('doctype')} = '{doctype}' AND v.{quote('fieldname')} = '{field}' "
		f"AND v.{quote('name')} = {alias}.{quote('name')}))"
	)
