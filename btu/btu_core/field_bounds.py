"""What a value of a BTU DocType's field may be, whoever sends it: text within what its column holds, finite numbers
within the column's range, dates and times a column stores and a zone can convert. Every BTU DocType's document is a
BoundedDocument, checked before its own code or Frappe's checks read the values (a REST body reaches both uncast),
so a hostile value gets a ValidationError (HTTP 417) naming the field and what it may hold, never a 500 from deeper
down, and nothing is stored.
"""

from __future__ import annotations

import math
from datetime import date, datetime, timedelta

import frappe
from frappe import _
from frappe.model.document import Document

# MariaDB's int(11), Frappe's Int column.
INT_RANGE = (-(2**31), 2**31 - 1)
# Frappe's Float column is decimal(21,9): less than 10^12 either side.
FLOAT_LIMIT = 10**12
# Small Text, Text and Code are MariaDB's text: 65,535 bytes.
TEXT_BYTES = 65_535
TEXT_TYPES = ("Small Text", "Text", "Code", "Text Editor", "Markdown Editor", "HTML Editor", "JSON")
# A Password is kept encrypted in __Auth's text column, where Fernet makes it a third longer.
PASSWORD_BYTES = 40_000
# A moment every zone converts both ways (year 1 and 9999 overflow when an offset moves them).
EARLIEST = datetime(1900, 1, 1)
LATEST = datetime(9998, 12, 31, 23, 59, 59)
SCALAR_TYPES = (str, int, float, date, datetime, timedelta)
NUMBER_TYPES = ("Int", "Check", "Float", "Currency", "Percent")
MOMENT_TYPES = ("Date", "Datetime", "Time")


class BoundedDocument(Document):
	"""A BTU DocType's document: its fields' values are checked (check) before anything else reads them, on insert
	and on every save."""

	def _validate_links(self):
		# The first step of insert and save to read the values (v16's link check asserts on a name that is no text),
		# before the controller's own methods.
		check(self)
		super()._validate_links()


def check(doc: Document) -> None:
	"""Refuse the first value of `doc` or its rows that its field cannot hold, naming the field and the row; leave each
	number field holding a number (Frappe casts them only after the controller's checks have compared them)."""
	for row in (doc, *doc.get_all_children()):
		for df in row.meta.fields:
			value = row.get(df.fieldname)
			if value is None or value == "" or df.fieldtype == "Table":
				continue
			if problem := value_problem(df.fieldtype, value):
				where = _("{0} row {1}").format(_(row.meta.name), row.idx) if row is not doc else _(doc.doctype)
				frappe.throw(
					_("{0}: {1} ({2}) {3}").format(where, _(df.label or df.fieldname), df.fieldname, problem),
					frappe.ValidationError,
					title=_("Invalid value"),
				)
			if df.fieldtype in NUMBER_TYPES:
				row.set(df.fieldname, frappe.utils.cast(df.fieldtype, value))


def value_problem(fieldtype: str, value) -> str | None:
	"""What is wrong with `value` for a field of `fieldtype`, or None."""
	if not isinstance(value, SCALAR_TYPES):
		return _("must be text or a number, not {0}").format(type(value).__name__)
	if fieldtype in ("Int", "Check"):
		return number_problem(value, *INT_RANGE, whole=True)
	if fieldtype in ("Float", "Currency", "Percent"):
		return number_problem(value, -FLOAT_LIMIT, FLOAT_LIMIT, whole=False)
	if fieldtype in ("Date", "Datetime"):
		return moment_problem(value)
	if not isinstance(value, str) and fieldtype not in MOMENT_TYPES:
		return _("must be text, not {0}").format(type(value).__name__)
	limit = TEXT_BYTES if fieldtype in TEXT_TYPES else PASSWORD_BYTES if fieldtype == "Password" else None
	if limit and isinstance(value, str) and len(value.encode("utf-8", "replace")) > limit:
		return _("is {0} bytes long, more than the {1} it holds; keep longer data in a document or a file").format(
			len(value.encode("utf-8", "replace")), limit
		)
	return None


def number_problem(value, low: int, high: int, *, whole: bool) -> str | None:
	kind = _("a whole number") if whole else _("a number")
	if isinstance(value, (date, datetime)):
		return _("must be {0}, not a date").format(kind)
	try:
		number = float(value)
	except (TypeError, ValueError, OverflowError):
		return _("must be {0}, not {1}").format(kind, repr(str(value)[:40]))
	if not math.isfinite(number) or not low <= number <= high:
		return _("must be {0} from {1} to {2}, not {3}").format(kind, low, high, str(value)[:40])
	return None


def moment_problem(value) -> str | None:
	"""A date or date and time (text in any form Frappe reads, with or without an offset) within EARLIEST..LATEST."""
	if not isinstance(value, (str, date)):  # datetime is a date; a number is no moment, though Frappe may read one
		return _("is not a date and time; give one such as 2026-12-01 09:30:00")
	try:
		moment = frappe.utils.get_datetime(value)
	except (ValueError, TypeError, OverflowError):
		return _("is not a date and time; give one such as 2026-12-01 09:30:00")
	if moment is None:
		return None
	naive = moment.replace(tzinfo=None)
	if not EARLIEST <= naive <= LATEST:
		return _("must be from {0} to {1}, not {2}").format(EARLIEST.date(), LATEST.date(), str(value)[:40])
	return None
