"""Each BTU DocType's controller carries the types block Frappe's exporter writes for it
(`export_python_type_annotations` in hooks.py), current with its fields: what an editor and a type checker read for the
DocType's fields.

The block is compared as code (its syntax tree), not as text: the exporter writes a long `DF.Literal[...]` on one line
and `ruff format` (tests/setup/test_lint.py) wraps it at 120 columns, as Frappe's own pre-commit does after an export.
"""

import ast
import shutil
import tempfile
from pathlib import Path

import frappe

try:
	from frappe.tests import IntegrationTestCase
except ImportError:
	from frappe.tests.utils import FrappeTestCase as IntegrationTestCase


class TestControllers(IntegrationTestCase):
	def test_every_controller_has_its_current_types_block(self):
		from frappe.types.exporter import TypeExporter

		doctypes = frappe.get_all("DocType", filters={"module": "BTU Core", "custom": 0}, pluck="name")
		self.assertGreater(len(doctypes), 10)
		stale = []
		with tempfile.TemporaryDirectory() as scratch:
			for doctype in doctypes:
				exporter = TypeExporter(frappe.get_doc("DocType", doctype))
				original, copy = exporter.controller_path, Path(scratch) / exporter.controller_path.name
				shutil.copy(original, copy)
				exporter.controller_path = copy
				exporter.export_types()
				if ast.dump(ast.parse(copy.read_text())) != ast.dump(ast.parse(original.read_text())):
					stale.append(doctype)
		self.assertEqual(
			stale,
			[],
			"save these DocTypes in developer mode (Frappe's exporter writes the block), run ruff format and"
			" commit their controllers",
		)
