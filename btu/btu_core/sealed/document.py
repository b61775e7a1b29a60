"""SealedDocument: a DocType whose sealed fields (btu.shared.sealed) are Document fields to its code and its readers,
and never in its table.

Loading fills them from the sealed table: whoever Frappe lets load the document (its form, `frappe.client.get`,
`/api/resource/<doctype>/<name>`, print) sees them, with the field permlevels Frappe applies to any field. Writing
(insert, save, `db_set`) keeps the column NULL and the value in the sealed table, so no filter, count, group-by or
export of the DocType reads a byte of it. Deleting forgets them; renaming moves them.
"""

from __future__ import annotations

from contextlib import contextmanager

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
		store.write(self.doctype, self.name, {field: self.get(field) for field in self.sealed_fields})

	def db_update(self, *args, **kwargs):
		with self._columns_left_empty():
			super().db_update(*args, **kwargs)
		store.write(self.doctype, self.name, {field: self.get(field) for field in self.sealed_fields})

	def db_set(self, fieldname, value=None, *args, **kwargs):
		values = fieldname if isinstance(fieldname, dict) else {fieldname: value}
		sealed = {field: values[field] for field in values if field in self.sealed_fields}
		rest = {field: value for field, value in values.items() if field not in sealed}
		if sealed:
			self.update(sealed)
			store.write(self.doctype, self.name, sealed)
		if rest or not sealed:
			return super().db_set(rest, None, *args, **kwargs)

	def on_trash(self):
		store.forget(self.doctype, self.name)

	def after_rename(self, old: str, new: str, merge: bool = False):
		if merge:
			store.forget(self.doctype, old)
		else:
			store.rename(self.doctype, old, new)

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
