"""SealedDocument: a DocType whose sealed fields (btu.shared.sealed) are Document fields to its code and its readers,
and never in its table.

Loading fills them from the sealed table: whoever Frappe lets load the document (its form, `frappe.client.get`,
`/api/resource/<doctype>/<name>`, print) sees them, with the field permlevels Frappe applies to any field. Writing
(insert, save, `db_set`) keeps the column NULL and the value in the sealed table, so no filter, count, group-by or
export of the DocType reads a byte of it. Deleting forgets them; renaming moves them.
"""

from __future__ import annotations

from contextlib import contextmanager

import frappe
from frappe.model.document import Document

from btu.btu_core.sealed import store
from btu.shared.sealed import FIELDS


class SealedDocument(Document):
	@property
	def sealed_fields(self) -> tuple[str, ...]:
		return FIELDS[self.doctype]

	def load_from_db(self):
		loaded = super().load_from_db()
		values = store.read(self.doctype, [self.name]).get(self.name, {})
		for field in self.sealed_fields:
			# A value its column holds was written there by SQL after the one sealed (shared.sealed.value_sql).
			if not self.get(field):
				self.set(field, values.get(field))
		return loaded

	def db_insert(self, *args, **kwargs):
		with self._columns_left_empty():
			super().db_insert(*args, **kwargs)
		# ignore_if_duplicate: the row may be another document's, whose values stay.
		keep = bool(kwargs.get("ignore_if_duplicate") or (args and args[0]))
		store.write(self.doctype, self.name, self._sealed_values(), keep_existing=keep)

	def db_update(self, *args, **kwargs):
		with self._columns_left_empty():
			super().db_update(*args, **kwargs)
		store.write(self.doctype, self.name, self._sealed_values())

	def db_set(self, fieldname, value=None, update_modified=True, notify=False, commit=False):
		values = fieldname if isinstance(fieldname, dict) else {fieldname: value}
		sealed = {field: values[field] for field in values if field in self.sealed_fields}
		if not sealed:
			return super().db_set(fieldname, value, update_modified, notify, commit)
		# As Document.db_set: the document before the change is read first (before_change, on_change compare it).
		if not self.get_doc_before_save() and not self.meta.istable:
			self.load_doc_before_save()
		self.update(sealed)
		store.write(self.doctype, self.name, sealed)
		rest = {field: value for field, value in values.items() if field not in sealed}
		# Frappe's db_set of the rest stamps `modified` (the scheduler's sign of a change), clears the cache, notifies;
		# with nothing to write (no stamp either) it would send an UPDATE without a SET.
		if rest or update_modified:
			return super().db_set(rest, None, update_modified, notify, commit)
		frappe.clear_document_cache(self.doctype, self.name)
		if commit:
			frappe.db.commit()

	def on_trash(self):
		store.forget(self.doctype, self.name)
		# Frappe then keeps the document as it is now in a Deleted Document (a column any get_count reads): without
		# them. Restored, it comes back without them.
		for field in self.sealed_fields:
			self.__dict__[field] = None

	def after_rename(self, old: str, new: str, merge: bool = False):
		if merge:
			store.forget(self.doctype, old)
		else:
			store.rename(self.doctype, old, new)

	def _sealed_values(self) -> dict:
		return {field: self.get(field) for field in self.sealed_fields}

	@contextmanager
	def _columns_left_empty(self):
		"""The sealed fields None while Frappe writes the row, put back after."""
		held = {field: self.__dict__.get(field) for field in self.sealed_fields}
		for field in held:
			self.__dict__[field] = None
		try:
			yield
		finally:
			self.__dict__.update(held)
