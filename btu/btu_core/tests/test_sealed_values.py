"""Sealed values (btu.shared.sealed): every way a value is written leaves its column NULL and the value in the sealed
table; loading, renaming and deleting follow it; a Version says a sealed field changed, never what it held; a value
SQL wrote into a column is read first and sealed by the next migrate."""

from __future__ import annotations

import json

import frappe

from btu.btu_core.runs.retries import RunFailed
from btu.btu_core.runs.task_run import run_in_this_process
from btu.btu_core.sealed import store
from btu.btu_core.sealed.copies import HIDDEN
from btu.btu_core.task_runner import run_scheduled_task
from btu.btu_core.tests.utils import delete_committed, make_schedule, make_task, sealed_value
from btu.shared.sealed import FIELDS, TABLE, value_sql

try:
	from frappe.tests import IntegrationTestCase
except ImportError:
	from frappe.tests.utils import FrappeTestCase as IntegrationTestCase


def column(doctype: str, name: str, field: str):
	return frappe.db.sql(f"select `{field}` from `tab{doctype}` where name = %s", name)[0][0]


class TestSealedValues(IntegrationTestCase):
	def assert_sealed(self, doctype: str, name: str, field: str, expected: str | None):
		self.assertIsNone(column(doctype, name, field), f"{doctype} {name}: {field}'s column")
		self.assertEqual(sealed_value(doctype, name, field), expected)

	def test_insert_save_and_db_set_keep_the_column_null(self):
		task = make_task(arguments='{"name": "first"}')
		self.assert_sealed("BTU Task", task.name, "arguments", '{"name": "first"}')
		task.arguments = '{"name": "second"}'
		task.save()
		self.assert_sealed("BTU Task", task.name, "arguments", '{"name": "second"}')
		task.db_set("arguments", '{"name": "third"}')
		self.assert_sealed("BTU Task", task.name, "arguments", '{"name": "third"}')
		self.assertEqual(frappe.get_doc("BTU Task", task.name).arguments, '{"name": "third"}')
		task.arguments = ""
		task.save()
		self.assert_sealed("BTU Task", task.name, "arguments", None)
		schedule = make_schedule(task.name, argument_overrides='{"name": "override"}')
		self.assert_sealed("BTU Task Schedule", schedule.name, "argument_overrides", '{"name": "override"}')

	def test_a_run_writes_its_output_sealed(self):
		task = make_task(arguments='{"name": "sealed run"}')
		self.addCleanup(delete_committed, task.name)
		log = run_in_this_process(task.name)
		self.assertEqual(log.status, "Succeeded")
		for field in FIELDS["BTU Task Log"]:
			self.assertIsNone(column("BTU Task Log", log.name, field), field)
		self.assertIn("hello sealed run", sealed_value("BTU Task Log", log.name, "stdout"))
		self.assertIn("warning for sealed run", sealed_value("BTU Task Log", log.name, "stderr"))
		self.assertEqual(
			json.loads(sealed_value("BTU Task Log", log.name, "result_message")), {"greeted": "sealed run"}
		)
		self.assertIn("hello sealed run", frappe.get_doc("BTU Task Log", log.name).stdout)

	def test_a_version_says_a_sealed_field_changed_not_what_it_held(self):
		task = make_task(arguments='{"name": "before"}')
		task.arguments = '{"name": "after"}'
		task.desc_short = "renamed"
		task.save(ignore_version=False)  # in tests Frappe writes no Version unless asked
		data = json.loads(frappe.get_last_doc("Version", {"ref_doctype": "BTU Task", "docname": task.name}).data)
		changed = {field: (old, new) for field, old, new in data["changed"]}
		self.assertEqual(changed["arguments"], (HIDDEN, HIDDEN))
		self.assertEqual(changed["desc_short"][1], "renamed")

	def test_rename_moves_and_delete_forgets(self):
		task = make_task(arguments='{"name": "moved"}')
		renamed = frappe.rename_doc("BTU Task", task.name, f"{task.name}-renamed", force=True)
		self.assertEqual(sealed_value("BTU Task", renamed, "arguments"), '{"name": "moved"}')
		self.assertIsNone(sealed_value("BTU Task", task.name, "arguments"))
		frappe.delete_doc("BTU Task", renamed, force=True)
		self.assertFalse(frappe.db.sql(f"select 1 from `{TABLE}` where doctype = 'BTU Task' and name = %s", renamed))

	def test_what_sql_wrote_into_a_column_is_read_first_and_sealed_by_migrate(self):
		task = make_task(arguments='{"name": "sealed"}')
		frappe.db.set_value("BTU Task", task.name, "arguments", '{"name": "by sql"}')
		self.assertEqual(frappe.get_doc("BTU Task", task.name).arguments, '{"name": "by sql"}')
		read = frappe.db.sql(
			f"select {value_sql('BTU Task', 'arguments', 't')} from `tabBTU Task` t where t.name = %s", task.name
		)[0][0]
		self.assertEqual(read, '{"name": "by sql"}')
		self.assertGreaterEqual(store.seal_columns("BTU Task"), 1)  # what migrate's seal_stray_values does, uncommitted
		self.assert_sealed("BTU Task", task.name, "arguments", '{"name": "by sql"}')
		frappe.db.delete("BTU Task", task.name)
		self.assertGreaterEqual(store.forget_orphans("BTU Task"), 1)
		self.assertIsNone(sealed_value("BTU Task", task.name, "arguments"))

	def test_a_failed_job_raises_nothing_of_its_values_for_frappes_error_log(self):
		# Frappe's execute_job logs what a job raised with every frame's variables (get_traceback(with_context=True)).
		secret = f"zq{frappe.generate_hash(length=10)}"
		task = make_task("insert_then_fail", arguments=json.dumps({"marker": secret}))
		self.addCleanup(delete_committed, task.name)
		frappe.db.commit()
		with self.assertRaises(RunFailed):
			try:
				run_scheduled_task(task.name, None, "2026-11-24T02:30:00Z")
			except RunFailed:
				logged = frappe.get_traceback(with_context=True)
				raise
		log = frappe.get_last_doc("BTU Task Log", {"task": task.name})
		self.assertIn(secret, log.result_message)  # the Log, sealed, has it all
		self.assertIn(log.name, logged)
		self.assertIn("RuntimeError", logged)
		self.assertNotIn(secret, logged)

	def test_deleted_documents_keep_no_sealed_value(self):
		task = make_task(arguments='{"name": "deleted secret"}')
		frappe.delete_doc("BTU Task", task.name, force=True)
		deleted = frappe.get_last_doc("Deleted Document", {"deleted_doctype": "BTU Task", "deleted_name": task.name})
		self.assertNotIn("deleted secret", deleted.data)
		self.assertIn("desc_short", deleted.data)

	def test_a_field_that_is_not_sealed_is_refused(self):
		with self.assertRaises(ValueError):
			store.write("BTU Task", "x", {"desc_short": "no"})
		with self.assertRaises(ValueError):
			value_sql("BTU Task", "desc_short", "t")
