"""BTU's tables as Frappe v15 creates them from the app's own DocType JSON files.

Mirrors Frappe v15.55.1 (repository frappe/frappe, branch version-15)
(commit 2115b6410c54bdd3689302327fb1bcefeab7000b):

- ``frappe/database/mariadb/database.py``: ``MariaDBDatabase.setup_type_map``
  (fieldtype -> column type) -> `TYPE_MAP`;
- ``frappe/database/database.py``: ``VARCHAR_LEN``, ``OPTIONAL_COLUMNS``,
  ``DEFAULT_COLUMNS``, ``CHILD_TABLE_COLUMNS``, ``DEFAULT_SHORTCUTS``;
- ``frappe/database/schema.py``: ``get_definition`` (type with precision and
  length), ``DbColumn.get_definition`` (defaults, NOT NULL, unique),
  ``DBTable.get_columns_from_docfields`` and ``get_index_definitions``;
- ``frappe/database/mariadb/schema.py``: ``MariaDBTable.create`` (standard
  columns, child columns, ``index modified``, engine, row format, charset);
- ``frappe/model/__init__.py``: ``no_value_fields`` (fields without a column);
- ``frappe/core/doctype/doctype/doctype.py``: ``DocType.prepare_for_import``
  (the fields, hence the columns, in ``field_order``'s order);
- ``frappe/database/mariadb/framework_mariadb.sql``: ``tabSingles`` and
  ``tabSeries``;
- ``frappe/database/database.py``: ``add_index`` and ``get_index_name``, for the
  ``frappe.db.add_index`` calls in a controller's ``on_doctype_update`` (read
  from the controller's source with `ast`, never imported), which Frappe runs
  after every sync of the DocType.

Never imports frappe.
"""

from __future__ import annotations

import ast
import json
import re
from dataclasses import dataclass, field
from pathlib import Path

from pymysql.converters import escape_string

import btu

DOCTYPE_DIR = Path(btu.__file__).resolve().parent / "btu_core" / "doctype"

VARCHAR_LEN = 140
TYPE_MAP: dict[str, tuple[str, str | None]] = {
	"Currency": ("decimal", "21,9"),
	"Int": ("int", "11"),
	"Long Int": ("bigint", "20"),
	"Float": ("decimal", "21,9"),
	"Percent": ("decimal", "21,9"),
	"Check": ("int", "1"),
	"Small Text": ("text", ""),
	"Long Text": ("longtext", ""),
	"Code": ("longtext", ""),
	"Text Editor": ("longtext", ""),
	"Markdown Editor": ("longtext", ""),
	"HTML Editor": ("longtext", ""),
	"Date": ("date", ""),
	"Datetime": ("datetime", "6"),
	"Time": ("time", "6"),
	"Text": ("text", ""),
	"Data": ("varchar", str(VARCHAR_LEN)),
	"Link": ("varchar", str(VARCHAR_LEN)),
	"Dynamic Link": ("varchar", str(VARCHAR_LEN)),
	"Password": ("text", ""),
	"Select": ("varchar", str(VARCHAR_LEN)),
	"Rating": ("decimal", "3,2"),
	"Read Only": ("varchar", str(VARCHAR_LEN)),
	"Attach": ("text", ""),
	"Attach Image": ("text", ""),
	"Signature": ("longtext", ""),
	"Color": ("varchar", str(VARCHAR_LEN)),
	"Barcode": ("longtext", ""),
	"Geolocation": ("longtext", ""),
	"Duration": ("decimal", "21,9"),
	"Icon": ("varchar", str(VARCHAR_LEN)),
	"Phone": ("varchar", str(VARCHAR_LEN)),
	"Autocomplete": ("varchar", str(VARCHAR_LEN)),
	"JSON": ("json", ""),
}
NO_VALUE_FIELDS = (
	"Section Break",
	"Column Break",
	"Tab Break",
	"HTML",
	"Table",
	"Table MultiSelect",
	"Button",
	"Image",
	"Fold",
	"Heading",
)
TABLE_FIELDS = ("Table", "Table MultiSelect")
OPTIONAL_COLUMNS = ("_user_tags", "_comments", "_assign", "_liked_by")
DEFAULT_COLUMNS = ("name", "creation", "modified", "modified_by", "owner", "docstatus", "idx")
CHILD_TABLE_COLUMNS = ("parent", "parentfield", "parenttype")
DEFAULT_SHORTCUTS = ("_Login", "__user", "_Full Name", "Today", "__today", "now", "Now")
TEXT_TYPES = ("text", "longtext")
INDEX_LENGTH = re.compile(r"\s*\([^)]+\)\s*")
TABLE_OPTIONS = "ROW_FORMAT=DYNAMIC CHARACTER SET=utf8mb4 COLLATE=utf8mb4_unicode_ci"

STANDARD_COLUMNS = (
	("name", f"varchar({VARCHAR_LEN})"),
	("creation", "datetime(6)"),
	("modified", "datetime(6)"),
	("modified_by", f"varchar({VARCHAR_LEN})"),
	("owner", f"varchar({VARCHAR_LEN})"),
	("docstatus", "int(1) not null default '0'"),
	("idx", "int(8) not null default '0'"),
)
SINGLES_DDL = f"""CREATE TABLE IF NOT EXISTS `tabSingles` (
	`doctype` varchar(255) DEFAULT NULL,
	`field` varchar(255) DEFAULT NULL,
	`value` longtext,
	KEY `singles_doctype_field_index` (`doctype`, `field`)
) ENGINE=InnoDB {TABLE_OPTIONS}"""
SERIES_DDL = f"""CREATE TABLE IF NOT EXISTS `tabSeries` (
	`name` varchar(100),
	`current` int(10) NOT NULL DEFAULT 0,
	PRIMARY KEY(`name`)
) ENGINE=InnoDB {TABLE_OPTIONS}"""


# Frappe's own `tabScheduled Job Type` (frappe/core/doctype/scheduled_job_type/scheduled_job_type.json), the
# columns Frappe v15 and v16 give it: the rows BTU fires when a site turns on BTU Configuration.fire_frappe_jobs.
FRAPPE_JOB_DDL = f"""CREATE TABLE IF NOT EXISTS `tabScheduled Job Type` (
	`name` varchar({VARCHAR_LEN}) primary key,
	`creation` datetime(6), `modified` datetime(6), `modified_by` varchar({VARCHAR_LEN}), \
`owner` varchar({VARCHAR_LEN}),
	`docstatus` int(1) not null default '0', `idx` int(8) not null default '0',
	`stopped` int(1) not null default '0', `method` varchar({VARCHAR_LEN}), `server_script` varchar({VARCHAR_LEN}),
	`scheduler_event` varchar({VARCHAR_LEN}), `frequency` varchar({VARCHAR_LEN}), `cron_format` varchar({VARCHAR_LEN}),
	`create_log` int(1) not null default '0', `last_execution` datetime(6), `next_execution` datetime(6),
	`_user_tags` text, `_comments` text, `_assign` text, `_liked_by` text,
	index `modified`(`modified`)
) ENGINE=InnoDB {TABLE_OPTIONS}"""


def cint(value) -> int:
	"""`frappe.utils.cint`: an int, 0 for anything that is not a number."""
	try:
		return int(float(value))
	except (TypeError, ValueError):
		return 0


def flt(value) -> float:
	"""`frappe.utils.flt` without precision: a float, 0.0 for anything that is not a number."""
	try:
		return float(value)
	except (TypeError, ValueError):
		return 0.0


def column_type(fieldtype: str, precision=None, length=None) -> str | None:
	"""`frappe.database.schema.get_definition`: the column type, None for a field without a column."""
	mapped = TYPE_MAP.get(fieldtype)
	if not mapped:
		return None
	length = cint(length) or None
	if fieldtype == "Int" and length and length > 11:
		mapped = TYPE_MAP["Long Int"]
	coltype, size = mapped[0], mapped[1] or None
	if size:
		if fieldtype in ("Float", "Currency", "Percent") and cint(precision) > 6:
			size = "21,9"
		if length:
			if coltype == "varchar" or (coltype == "int" and length < 11):
				size = str(length)
	return f"{coltype}({size})" if size is not None else coltype


def column_definition(df: dict, for_modification: bool = False) -> str | None:
	"""`frappe.database.schema.DbColumn.get_definition`: type, default, NOT NULL and unique."""
	definition = column_type(df["fieldtype"], df.get("precision"), df.get("length"))
	if not definition:
		return None
	default = df.get("default")
	if df["fieldtype"] in ("Check", "Int"):
		definition += f" not null default {cint(default) or 0}"
	elif df["fieldtype"] in ("Currency", "Float", "Percent"):
		definition += f" not null default {flt(default) or 0}"
	elif default and default not in DEFAULT_SHORTCUTS and not str(default).startswith(":"):
		definition += f" default '{escape_string(str(default))}'"
	if df.get("unique") and not for_modification and definition not in TEXT_TYPES:
		definition += " unique"
	return definition


@dataclass(frozen=True)
class Column:
	name: str
	type: str
	definition: str
	index: bool = False
	unique: bool = False


@dataclass
class DocTypeSchema:
	"""A DocType's JSON file, and the table Frappe v15 makes for it."""

	name: str
	meta: dict
	columns: list[Column] = field(default_factory=list)
	# Index name -> columns, from the controller's on_doctype_update.
	controller_indexes: dict[str, tuple[str, ...]] = field(default_factory=dict)

	@classmethod
	def from_json(cls, path: Path) -> DocTypeSchema:
		try:
			meta = json.loads(path.read_text())
		except (OSError, ValueError) as exc:
			raise ValueError(f"{path}: not a readable DocType JSON file ({exc})") from exc
		if meta.get("doctype") != "DocType" or not meta.get("name"):
			raise ValueError(f'{path}: not a DocType JSON file (needs "doctype": "DocType" and a name)')
		# `DocType.prepare_for_import`: the fields (so the columns) in `field_order`'s order, then any it leaves out.
		order = {name: position for position, name in enumerate(meta.get("field_order") or [])}
		meta["fields"] = sorted(meta.get("fields") or [], key=lambda df: order.get(df.get("fieldname"), len(order)))
		schema = cls(meta["name"], meta)
		schema.columns = [] if schema.issingle else schema._columns()
		schema.controller_indexes = controller_indexes(path.with_suffix(".py"), schema.name)
		return schema

	@property
	def table(self) -> str:
		return f"tab{self.name}"

	@property
	def issingle(self) -> bool:
		return bool(cint(self.meta.get("issingle")))

	@property
	def istable(self) -> bool:
		return bool(cint(self.meta.get("istable")))

	@property
	def fields(self) -> list[dict]:
		return self.meta.get("fields") or []

	def value_fields(self) -> list[dict]:
		"""`Meta.get_fieldnames_with_value`: fields that hold a value (virtual ones excluded)."""
		return [df for df in self.fields if df.get("fieldtype") not in NO_VALUE_FIELDS and not df.get("is_virtual")]

	def table_fields(self) -> list[dict]:
		return [df for df in self.fields if df.get("fieldtype") in TABLE_FIELDS]

	def field(self, fieldname: str) -> dict | None:
		return next((df for df in self.fields if df.get("fieldname") == fieldname), None)

	def _columns(self) -> list[Column]:
		columns = [Column(name, definition.split(" ", 1)[0], definition) for name, definition in STANDARD_COLUMNS]
		docfields = list(self.value_fields())
		if not self.istable:
			docfields += [{"fieldname": name, "fieldtype": "Text"} for name in OPTIONAL_COLUMNS]
			if cint(self.meta.get("track_seen")):
				docfields.append({"fieldname": "_seen", "fieldtype": "Text"})
		seen = set(DEFAULT_COLUMNS)
		for df in docfields:
			definition = column_definition(df)
			if not definition or df["fieldname"] in seen:
				continue
			seen.add(df["fieldname"])
			coltype = column_type(df["fieldtype"], df.get("precision"), df.get("length"))
			unique = bool(cint(df.get("unique"))) and coltype not in TEXT_TYPES
			index = bool(cint(df.get("search_index"))) and not unique and coltype not in TEXT_TYPES
			columns.append(Column(df["fieldname"], coltype, definition, index=index, unique=unique))
		if self.istable:
			columns += [
				Column(name, f"varchar({VARCHAR_LEN})", f"varchar({VARCHAR_LEN})") for name in CHILD_TABLE_COLUMNS
			]
		return columns

	def indexes(self) -> dict[str, tuple[str, ...]]:
		"""Index name -> columns: as `MariaDBTable.create` names them, then the controller's."""
		indexes = {col.name: (col.name,) for col in self.columns if col.index}
		indexes["parent" if self.istable else "modified"] = ("parent",) if self.istable else ("modified",)
		indexes.update(self.controller_indexes)
		return indexes

	def create_sql(self) -> str:
		"""`MariaDBTable.create`'s CREATE TABLE, with IF NOT EXISTS."""
		definitions = [
			f"`{col.name}` {col.definition}" + (" primary key" if col.name == "name" else "") for col in self.columns
		]
		definitions += [f"index `{name}`({column_list(columns)})" for name, columns in self.indexes().items()]
		engine = self.meta.get("engine") or "InnoDB"
		body = ",\n\t".join(definitions)
		return f"CREATE TABLE IF NOT EXISTS `{self.table}` (\n\t{body}\n) ENGINE={engine} {TABLE_OPTIONS}"

	def alter_sql(
		self, current_types: dict[str, str], current_indexed: set[str], current_index_names: set[str]
	) -> list[str]:
		"""Statements that bring an existing table to this schema, keeping its rows.

		`current_types`: column name (lower case) -> information_schema COLUMN_TYPE;
		`current_indexed`: columns that lead an index; `current_index_names`: index
		names. Like `MariaDBTable.alter` (a single-column index counts when its
		column leads some index) and `add_index` (by name), it adds missing columns
		and indexes and changes types that differ; it drops nothing.
		"""
		statements = []
		for col in self.columns:
			current = current_types.get(col.name.lower())
			if current is None:
				statements.append(f"ALTER TABLE `{self.table}` ADD COLUMN `{col.name}` {col.definition}")
			elif normalised_type(current) != normalised_type(col.type) and col.name != "name":
				definition = (
					column_definition(self.field(col.name), for_modification=True)
					if self.field(col.name)
					else col.definition
				)
				statements.append(f"ALTER TABLE `{self.table}` MODIFY `{col.name}` {definition}")
		for name, columns in self.indexes().items():
			present = name.lower() in current_index_names if len(columns) > 1 else columns[0].lower() in current_indexed
			if not present:
				statements.append(f"ALTER TABLE `{self.table}` ADD INDEX `{name}`({column_list(columns)})")
		for col in self.columns:
			if (
				col.unique
				and current_types.get(col.name.lower()) is not None
				and col.name.lower() not in current_indexed
			):
				statements.append(
					f"ALTER TABLE `{self.table}` ADD UNIQUE INDEX IF NOT EXISTS `{col.name}` (`{col.name}`)"
				)
		return statements


def column_list(columns: tuple[str, ...]) -> str:
	"""Index columns, keeping a prefix length such as `name(10)` outside the quotes."""
	quoted = []
	for column in columns:
		bare = INDEX_LENGTH.sub("", column)
		quoted.append(f"`{bare}`{column[len(bare) :].strip()}" if column.startswith(bare) else f"`{column}`")
	return ", ".join(quoted)


def index_name(columns: tuple[str, ...]) -> str:
	"""`Database.get_index_name`."""
	return INDEX_LENGTH.sub("", "_".join(columns) + "_index")


def controller_indexes(controller: Path, doctype: str) -> dict[str, tuple[str, ...]]:
	"""Index name -> columns of the `frappe.db.add_index(doctype, [...])` calls in `on_doctype_update`."""
	try:
		tree = ast.parse(controller.read_text(), filename=str(controller))
	except FileNotFoundError:
		return {}
	except (OSError, SyntaxError) as exc:
		raise ValueError(f"{controller}: cannot be read for on_doctype_update ({exc})") from exc
	indexes = {}
	for function in tree.body:
		if not (isinstance(function, ast.FunctionDef) and function.name == "on_doctype_update"):
			continue
		for node in ast.walk(function):
			if not (isinstance(node, ast.Call) and ast.unparse(node.func) == "frappe.db.add_index"):
				continue
			try:
				args = [ast.literal_eval(arg) for arg in node.args]
				kwargs = {kw.arg: ast.literal_eval(kw.value) for kw in node.keywords}
			except ValueError as exc:
				raise ValueError(
					f"{controller}: add_index arguments must be literals to be mirrored by dev benches"
				) from exc
			target, columns = (args + [None, None])[:2]
			columns = tuple(columns or kwargs.get("fields") or ())
			if (target or kwargs.get("doctype")) != doctype or not columns:
				continue
			indexes[args[2] if len(args) > 2 else kwargs.get("index_name") or index_name(columns)] = columns
	return indexes


def normalised_type(coltype: str) -> str:
	"""MariaDB reports a `json` column as `longtext`."""
	coltype = coltype.lower().strip()
	return "longtext" if coltype == "json" else coltype


def load_doctypes(directory: Path = DOCTYPE_DIR) -> dict[str, DocTypeSchema]:
	"""DocType name -> schema, for every `<directory>/<folder>/<folder>.json`, as Frappe finds them."""
	schemas = {}
	for path in sorted(directory.glob("*/*.json")):
		if path.stem != path.parent.name:
			continue
		schema = DocTypeSchema.from_json(path)
		schemas[schema.name] = schema
	if not schemas:
		raise ValueError(f"{directory}: holds no DocType JSON files (expected <doctype>/<doctype>.json)")
	return schemas
