"""A document's Versions without its sealed values.

Frappe writes a Version of each save of a DocType that tracks changes, with the old and new value of each changed
field, in a column like any other, which `get_count` filters for anyone on v15. So a Version of a BTU DocType says
that a sealed field changed, with HIDDEN for both values. (Its Deleted Document, written by SQL with no hook, gets
none: SealedDocument.on_trash empties them first.)
"""

from __future__ import annotations

import json

import frappe

from btu.shared.sealed import FIELDS

HIDDEN = "(sealed)"


def hide_in_version(doc, method=None) -> None:
	"""`before_insert` of Version (doc_events in hooks.py)."""
	hidden = _version_data(doc.ref_doctype, doc.data)
	if hidden is not None:
		doc.data = hidden


def hide_in_existing_versions() -> int:
	"""The Versions written before values were sealed, hidden as new ones are (migrate's seal_stray_values); how many
	changed."""
	changed = 0
	for doctype, fields in FIELDS.items():
		mentions = " or ".join(["data like %s"] * len(fields))
		rows = frappe.db.sql(
			f"select name, data from tabVersion where ref_doctype = %s and ({mentions})",
			(doctype, *(f'%["{field}",%' for field in fields)),
		)
		for name, data in rows:
			hidden = _version_data(doctype, data)
			if hidden is not None:
				frappe.db.sql("update tabVersion set data = %s where name = %s", (hidden, name))
				changed += 1
	return changed


def _version_data(doctype: str, text: str | None) -> str | None:
	"""`text` (a Version's data) with the sealed fields' values hidden; None when it has none to hide."""
	fields = FIELDS.get(doctype)
	if not fields or not text:
		return None
	try:
		data = json.loads(text)
	except ValueError:
		return None
	changed = data.get("changed") or [] if isinstance(data, dict) else []
	if not any(change[0] in fields and list(change[1:]) != [HIDDEN, HIDDEN] for change in changed):
		return None
	data["changed"] = [[change[0], HIDDEN, HIDDEN] if change[0] in fields else change for change in changed]
	return json.dumps(data, separators=(",", ":"))
