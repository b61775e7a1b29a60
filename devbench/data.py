"""Rows in a site's BTU tables, written as Frappe v15 writes them, for tests, the demo and benchmarks.

`SiteData` fills the standard columns (name by the DocType's autoname,
creation and modified in the site's system time zone, owner Administrator)
and the DocType's defaults, so the scheduler reads these rows exactly as it
reads rows saved from the Desk. It bypasses controllers: no validation, no
hooks. Never imports frappe.
"""

from __future__ import annotations

import json
import secrets
from datetime import datetime
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

import pymysql

from btu.scheduler_daemon.reads.bench import Bench
from btu.shared import sealed
from btu.shared.instants import FRAPPE_DEFAULT_ZONE
from devbench.schema import DEFAULT_SHORTCUTS, DocTypeSchema, cint, flt, load_doctypes

ADMINISTRATOR = "Administrator"
STANDARD_FIELDS = ("name", "owner", "creation", "modified", "modified_by", "docstatus", "idx")


class SiteDataError(Exception):
	"""A row that cannot be written; the message names the DocType, the field and the fix."""


def read_single(cur, doctype: str, fieldname: str) -> str | None:
	cur.execute("SELECT value FROM `tabSingles` WHERE doctype=%s AND field=%s", (doctype, fieldname))
	row = cur.fetchone()
	return None if row is None else row[0]


def write_single(cur, doctype: str, fieldname: str, value) -> None:
	"""`frappe.db.set_single_value`: delete the row, insert the new value."""
	cur.execute("DELETE FROM `tabSingles` WHERE doctype=%s AND field=%s", (doctype, fieldname))
	cur.execute("INSERT INTO `tabSingles` (doctype, field, value) VALUES (%s, %s, %s)", (doctype, fieldname, value))


SEALED_UPSERT = (
	f"INSERT INTO `{sealed.TABLE}` (doctype, name, fieldname, value) VALUES (%s, %s, %s, %s) "
	"ON DUPLICATE KEY UPDATE value = VALUES(value)"
)


def write_sealed(cur, doctype: str, name: str, values: dict) -> None:
	"""A document's sealed fields where BTU keeps them (btu.shared.sealed), as its Document writes them: an empty value
	removes the field's row."""
	for field, value in values.items():
		if value in (None, ""):
			cur.execute(
				f"DELETE FROM `{sealed.TABLE}` WHERE doctype=%s AND name=%s AND fieldname=%s", (doctype, name, field)
			)
		else:
			cur.execute(SEALED_UPSERT, (doctype, name, field, value))


def sealed_values(doctype: str, row: dict) -> dict:
	"""Take `doctype`'s sealed fields out of `row` (its column stays NULL): {field: value}."""
	return {field: row.pop(field) for field in sealed.FIELDS.get(doctype, ()) if field in row}


def generate_hash(length: int = 10) -> str:
	"""`frappe.generate_hash`: the name of a DocType with autoname "hash"."""
	return secrets.token_hex((length + 1) // 2)[:length]


def static_default(df: dict):
	"""`frappe.model.create_new.get_static_default_value` for one field, typed for its column."""
	default = df.get("default")
	if default in (None, "") or default in DEFAULT_SHORTCUTS or str(default).startswith(":"):
		if df.get("fieldtype") == "Select" and df.get("options") and df["options"] not in ("[Select]", "Loading..."):
			return df["options"].split("\n", 1)[0]
		default = None
	return typed(df, default)


def typed(df: dict, value):
	"""`BaseDocument.get_valid_dict`: numbers of Check/Int and Float/Currency/Percent fields are never NULL."""
	if df.get("fieldtype") in ("Check", "Int"):
		return cint(value)
	if df.get("fieldtype") in ("Float", "Currency", "Percent"):
		return flt(value)
	return value


class SiteData:
	"""Insert, update and delete BTU rows in one site of a bench."""

	def __init__(self, bench: Bench, site: str, schemas: dict[str, DocTypeSchema] | None = None):
		self.bench = bench
		self.site = bench.site(site)
		self.schemas = schemas or load_doctypes()
		self._conn: pymysql.Connection | None = None

	@property
	def conn(self) -> pymysql.Connection:
		if self._conn is None or not self._conn.open:
			params = {k: v for k, v in self.site.db_params.items() if v is not None}
			if params.pop("socket", None):
				params["unix_socket"] = self.site.db_params["socket"]
			self._conn = pymysql.connect(**params, charset="utf8mb4", autocommit=True)
		return self._conn

	def close(self) -> None:
		if self._conn is not None:
			self._conn.close()
			self._conn = None

	def __enter__(self) -> SiteData:
		return self

	def __exit__(self, *exc) -> None:
		self.close()

	def schema(self, doctype: str) -> DocTypeSchema:
		try:
			return self.schemas[doctype]
		except KeyError:
			raise SiteDataError(
				f"doctype {doctype!r}: not a BTU DocType; known: {', '.join(sorted(self.schemas))}"
			) from None

	def system_time_zone(self) -> str:
		with self.conn.cursor() as cur:
			return read_single(cur, "System Settings", "time_zone") or FRAPPE_DEFAULT_ZONE

	def now(self) -> datetime:
		"""`frappe.utils.now_datetime`: now in the system time zone, naive."""
		return datetime.now(self.zone()).replace(tzinfo=None)

	def zone(self) -> ZoneInfo:
		name = self.system_time_zone()
		try:
			return ZoneInfo(name)
		except (ZoneInfoNotFoundError, ValueError) as exc:
			raise SiteDataError(
				f"site {self.site.name}: System Settings time_zone {name!r} is not an IANA zone"
			) from exc

	def insert_task(self, **fields) -> str:
		return self.insert("BTU Task", **fields)

	def task_functions(self) -> dict[str, tuple[str, str]]:
		"""desc_short -> (name, function_string) of every BTU Task on the site."""
		with self.conn.cursor() as cur:
			cur.execute("SELECT desc_short, name, function_string FROM `tabBTU Task`")
			return {desc: (name, function) for desc, name, function in cur.fetchall()}

	def insert_schedule(self, task: str, **fields) -> str:
		return self.insert("BTU Task Schedule", task=task, **fields)

	def update_schedule(self, name: str, **fields) -> None:
		self.update("BTU Task Schedule", name, **fields)

	def delete_schedule(self, name: str) -> None:
		self.delete("BTU Task Schedule", name)

	def insert(self, doctype: str, **fields) -> str:
		"""Insert a document (with child rows for Table fields given as lists of dicts); return its name."""
		schema = self.schema(doctype)
		if schema.issingle:
			raise SiteDataError(f"doctype {doctype!r} is a Single: use set_single({doctype!r}, field, value)")
		self.check_fields(schema, fields)
		children = {
			name: fields.pop(name) for name in [df["fieldname"] for df in schema.table_fields()] if name in fields
		}
		now = self.now()
		row = self.new_row(schema, now)
		row.update({k: self.to_db(v, schema.field(k)) for k, v in fields.items()})
		with self.conn.cursor() as cur:
			self.fill_fetched(cur, schema, row, fields)
			self.conn.begin()
			try:
				row["name"] = row.get("name") or self.autoname(cur, schema, row, now)
				hidden = sealed_values(doctype, row)
				self.insert_row(cur, schema, row)
				write_sealed(cur, doctype, row["name"], hidden)
				for fieldname, rows in children.items():
					self.insert_children(cur, schema, fieldname, row["name"], rows, now)
				self.conn.commit()
			except BaseException:
				self.conn.rollback()
				raise
		return row["name"]

	@staticmethod
	def new_row(schema: DocTypeSchema, now: datetime) -> dict:
		"""A new document's columns before its given fields, as Frappe fills them: defaults, owner, timestamps."""
		row = {df["fieldname"]: static_default(df) for df in schema.value_fields()}
		row.update(
			{
				"owner": ADMINISTRATOR,
				"modified_by": ADMINISTRATOR,
				"creation": now,
				"modified": now,
				"docstatus": 0,
				"idx": 0,
			}
		)
		return row

	def insert_many(self, doctype: str, rows: list[dict], batch: int = 2000) -> None:
		"""Insert plain rows by executemany, each with its `name`, the other columns filled as `insert` fills them: the
		thousands of rows a benchmark needs. No child rows, no fetched fields, no naming series."""
		schema = self.schema(doctype)
		keys = {key for given in rows for key in given}
		self.check_fields(schema, dict.fromkeys(keys - {"name"}))
		fields = {key: schema.field(key) for key in keys}
		zone = self.zone()  # read once: a zone-aware datetime in each row would read it again
		base = self.new_row(schema, datetime.now(zone).replace(tzinfo=None))
		columns = [col.name for col in schema.columns]
		merged = [{**base, **{k: self.to_db(v, fields[k], zone) for k, v in given.items()}} for given in rows]
		# A new row's empty sealed field has nothing to remove: only the values are written.
		hidden = [
			(doctype, row["name"], field, value)
			for row in merged
			for field, value in sealed_values(doctype, row).items()
			if value not in (None, "")
		]
		values = [tuple(row.get(c) for c in columns) for row in merged]
		sql = (
			f"INSERT INTO `{schema.table}` ({', '.join(f'`{c}`' for c in columns)}) "
			f"VALUES ({', '.join(['%s'] * len(columns))})"
		)
		with self.conn.cursor() as cur:
			for start in range(0, len(values), batch):
				cur.executemany(sql, values[start : start + batch])
			for start in range(0, len(hidden), batch):
				cur.executemany(SEALED_UPSERT, hidden[start : start + batch])

	def update(self, doctype: str, name: str, **fields) -> None:
		"""Set `fields` and the modified stamp of one document."""
		schema = self.schema(doctype)
		self.check_fields(schema, fields)
		if any(df["fieldname"] in fields for df in schema.table_fields()):
			raise SiteDataError(
				f"{doctype} {name}: Table fields cannot be updated here; delete and insert the document"
			)
		values = {k: self.to_db(v, schema.field(k)) for k, v in fields.items()}
		hidden = sealed_values(doctype, values)
		values.setdefault("modified", self.now())
		values.setdefault("modified_by", ADMINISTRATOR)
		assignments = ", ".join(f"`{column}`=%s" for column in values)
		with self.conn.cursor() as cur:
			if not cur.execute(f"SELECT 1 FROM `{schema.table}` WHERE name=%s", (name,)):
				raise SiteDataError(f"{doctype} {name!r} does not exist in site {self.site.name}")
			cur.execute(f"UPDATE `{schema.table}` SET {assignments} WHERE name=%s", (*values.values(), name))
			write_sealed(cur, doctype, name, hidden)

	def delete(self, doctype: str, name: str) -> None:
		"""Delete one document and its child rows; deleting a missing one is not an error."""
		schema = self.schema(doctype)
		with self.conn.cursor() as cur:
			for df in schema.table_fields():
				child = self.schema(df["options"])
				cur.execute(f"DELETE FROM `{child.table}` WHERE parent=%s AND parenttype=%s", (name, doctype))
			cur.execute(f"DELETE FROM `{schema.table}` WHERE name=%s", (name,))
			cur.execute(f"DELETE FROM `{sealed.TABLE}` WHERE doctype=%s AND name=%s", (doctype, name))

	def get(self, doctype: str, name: str) -> dict | None:
		schema = self.schema(doctype)
		with self.conn.cursor(pymysql.cursors.DictCursor) as cur:
			cur.execute(f"SELECT * FROM `{schema.table}` WHERE name=%s", (name,))
			row = cur.fetchone()
			if row is not None:
				cur.execute(
					f"SELECT fieldname, value FROM `{sealed.TABLE}` WHERE doctype=%s AND name=%s", (doctype, name)
				)
				row.update({item["fieldname"]: item["value"] for item in cur.fetchall()})
			return row

	def set_single(self, doctype: str, fieldname: str, value) -> None:
		with self.conn.cursor() as cur:
			write_single(cur, doctype, fieldname, self.to_db(value))

	def get_single(self, doctype: str, fieldname: str) -> str | None:
		with self.conn.cursor() as cur:
			return read_single(cur, doctype, fieldname)

	def check_fields(self, schema: DocTypeSchema, fields: dict) -> None:
		known = set(STANDARD_FIELDS) | {df["fieldname"] for df in schema.value_fields()}
		known |= {df["fieldname"] for df in schema.table_fields()}
		if schema.istable:
			known |= {"parent", "parentfield", "parenttype"}
		unknown = sorted(set(fields) - known)
		if unknown:
			raise SiteDataError(
				f"{schema.name} has no field {', '.join(map(repr, unknown))}; "
				f"its fields are in {schema.name}'s DocType JSON: "
				f"{', '.join(sorted(known - set(STANDARD_FIELDS)))}"
			)

	def to_db(self, value, df: dict | None = None, zone: ZoneInfo | None = None):
		"""Python values as Frappe stores them: JSON text, 0/1, naive system-zone datetimes (`zone`, read from the site
		when not given)."""
		if isinstance(value, (dict, list)):
			return json.dumps(value)
		if isinstance(value, bool):
			return int(value)
		if isinstance(value, datetime) and value.tzinfo is not None:
			return value.astimezone(zone or self.zone()).replace(tzinfo=None)
		return typed(df, value) if df else value

	def fill_fetched(self, cur, schema: DocTypeSchema, row: dict, given: dict) -> None:
		"""`fetch_from` fields not given, from the linked document, as Frappe does on save."""
		for df in schema.value_fields():
			source = df.get("fetch_from")
			if not source or df["fieldname"] in given or "." not in source:
				continue
			link_field, source_field = source.split(".", 1)
			link = schema.field(link_field)
			if (
				not link
				or link.get("fieldtype") != "Link"
				or not row.get(link_field)
				or link["options"] not in self.schemas
			):
				continue
			cur.execute(f"SELECT `{source_field}` FROM `tab{link['options']}` WHERE name=%s", (row[link_field],))
			found = cur.fetchone()
			if found:
				row[df["fieldname"]] = found[0]

	def autoname(self, cur, schema: DocTypeSchema, row: dict, now: datetime) -> str:
		"""`frappe.model.naming`: "field:x", "hash" (or none), or an old-style series "PREFIX-.#####"."""
		autoname = (schema.meta.get("autoname") or "").strip()
		if autoname.startswith("field:"):
			value = row.get(autoname[len("field:") :].strip())
			if not value:
				raise SiteDataError(f"{schema.name}: autoname {autoname!r} needs that field; pass it")
			return str(value)
		if not autoname or autoname.lower() == "hash":
			return generate_hash()
		if "#" not in autoname or autoname.startswith(("format:", "naming_series:")):
			raise SiteDataError(f"{schema.name}: autoname {autoname!r} is not supported here; pass name=...")
		name = ""
		for part in autoname.split("."):
			if part.startswith("#"):
				name += str(self.next_in_series(cur, name)).zfill(len(part))
			else:
				name += {
					"YY": now.strftime("%y"),
					"YYYY": now.strftime("%Y"),
					"MM": now.strftime("%m"),
					"DD": now.strftime("%d"),
				}.get(part, part)
		return name

	@staticmethod
	def next_in_series(cur, key: str) -> int:
		"""`frappe.model.naming.getseries`: the next number of `key` in tabSeries, under a row lock."""
		cur.execute("SELECT current FROM `tabSeries` WHERE name=%s FOR UPDATE", (key,))
		found = cur.fetchone()
		if found and found[0] is not None:
			cur.execute("UPDATE `tabSeries` SET current = current + 1 WHERE name=%s", (key,))
			return cint(found[0]) + 1
		cur.execute("INSERT INTO `tabSeries` (name, current) VALUES (%s, 1)", (key,))
		return 1

	@staticmethod
	def insert_row(cur, schema: DocTypeSchema, row: dict) -> None:
		columns = {col.name for col in schema.columns}
		values = {k: v for k, v in row.items() if k in columns}
		names = ", ".join(f"`{k}`" for k in values)
		cur.execute(
			f"INSERT INTO `{schema.table}` ({names}) VALUES ({', '.join(['%s'] * len(values))})", tuple(values.values())
		)

	def insert_children(
		self, cur, parent: DocTypeSchema, fieldname: str, parent_name: str, rows: list[dict], now: datetime
	) -> None:
		child = self.schema(parent.field(fieldname)["options"])
		for idx, given in enumerate(rows, start=1):
			self.check_fields(child, given)
			row = {df["fieldname"]: static_default(df) for df in child.value_fields()}
			row.update(
				{"owner": ADMINISTRATOR, "modified_by": ADMINISTRATOR, "creation": now, "modified": now, "docstatus": 0}
			)
			row.update({k: self.to_db(v, child.field(k)) for k, v in given.items()})
			row.update({"parent": parent_name, "parentfield": fieldname, "parenttype": parent.name, "idx": idx})
			row["name"] = row.get("name") or generate_hash()
			self.insert_row(cur, child, row)
