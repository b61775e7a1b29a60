"""What the upgrade could not convert, kept in BTU Configuration's `upgrade_notes` (JSON) and printed by migrate.

A note names the row, the field, the value found (left as it is) and what to do. Written through tabSingles,
so the patch that runs before the DocTypes sync can write it too.
"""

from __future__ import annotations

import json

import frappe

from btu.btu_core.sealed.copies import HIDDEN
from btu.shared.sealed import FIELDS

CONFIG = "BTU Configuration"
FIELD = "upgrade_notes"


def note(doctype: str, name: str, field: str, value, text: str) -> dict:
	"""A note on `field` of the row `name`; a sealed field's value is not copied into it (BTU Configuration's notes
	are a column any user's get_count reads on v15): the row keeps it (btu.shared.sealed)."""
	if any(field in fields for fields in FIELDS.values()):
		value = HIDDEN if value not in (None, "") else value
	return {
		"doctype": doctype,
		"name": name,
		"field": field,
		"value": "" if value is None else str(value),
		"note": text,
	}


def stored() -> list[dict]:
	text = frappe.db.sql("select value from tabSingles where doctype = %s and field = %s", (CONFIG, FIELD))
	try:
		return json.loads(text[0][0]) if text and text[0][0] else []
	except ValueError:
		return []


def add(new: list[dict]) -> list[dict]:
	"""Store `new` beside the stored notes (one per row and field: a second run replaces, never repeats); print each
	note not stored before, one line each. Returns the notes added."""
	notes = {(n["doctype"], n["name"], n["field"]): n for n in stored()}
	added = [n for n in new if notes.get((n["doctype"], n["name"], n["field"])) != n]
	if not added:
		return []
	for item in added:
		notes[(item["doctype"], item["name"], item["field"])] = item
		print(f"BTU upgrade: {item['doctype']} {item['name']}: {item['field']} {item['value']!r}: {item['note']}")
	frappe.db.sql("delete from tabSingles where doctype = %s and field = %s", (CONFIG, FIELD))
	frappe.db.sql(
		"insert into tabSingles (doctype, field, value) values (%s, %s, %s)",
		(
			CONFIG,
			FIELD,
			json.dumps(sorted(notes.values(), key=lambda n: (n["doctype"], n["name"], n["field"])), indent=1),
		),
	)
	return added
