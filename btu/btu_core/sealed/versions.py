"""A sealed field's change in a document's history (Version) without its values.

Frappe writes a Version of each save of a DocType that tracks changes, with the old and new value of every field
that changed; Version's `data` is a column like any other, which `get_count` filters for anyone on v15. So a
Version of a BTU DocType says that a sealed field changed, never what it held.
"""

from __future__ import annotations

import json

from btu.shared.sealed import FIELDS

HIDDEN = "(sealed)"


def hide_sealed_values(doc, method=None) -> None:
	"""`before_insert` of Version (doc_events in hooks.py)."""
	fields = FIELDS.get(doc.ref_doctype)
	if not fields or not doc.data:
		return
	try:
		data = json.loads(doc.data)
	except ValueError:
		return
	changed = data.get("changed") or []
	if not any(change[0] in fields for change in changed):
		return
	data["changed"] = [[change[0], HIDDEN, HIDDEN] if change[0] in fields else change for change in changed]
	doc.data = json.dumps(data, separators=(",", ":"))
