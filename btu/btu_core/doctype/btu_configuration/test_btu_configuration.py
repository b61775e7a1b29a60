import frappe

from btu.btu_core import install

try:
	from frappe.tests import IntegrationTestCase
except ImportError:
	from frappe.tests.utils import FrappeTestCase as IntegrationTestCase


CONFIG = "BTU Configuration"


class TestBTUConfiguration(IntegrationTestCase):
	def test_default_time_zone_must_be_known(self):
		config = frappe.get_single("BTU Configuration")
		config.default_time_zone = "Mars/Olympus_Mons"
		with self.assertRaises(frappe.ValidationError) as caught:
			config.save()
		self.assertIn("default_time_zone 'Mars/Olympus_Mons'", str(caught.exception))

	def test_install_left_defaults_and_role(self):
		# From the state install-app starts in, not from what this site was set to since: the
		# configuration with no values and the role without desk access. The site's own values come back after.
		saved = frappe.db.sql("select field, value from `tabSingles` where doctype = %s", CONFIG)
		desk_access = frappe.db.get_value("Role", "BTU Manager", "desk_access")
		try:
			frappe.db.delete("Singles", {"doctype": CONFIG})
			frappe.db.set_value("Role", "BTU Manager", "desk_access", 0)
			install.after_install()
			self.assertTrue(frappe.db.exists("Role", "BTU Manager"))
			self.assertEqual(frappe.db.get_value("Role", "BTU Manager", "desk_access"), 1)
			self.assertEqual(frappe.db.get_single_value(CONFIG, "enabled", cache=False), 1)
			self.assertEqual(frappe.db.get_single_value(CONFIG, "default_catch_up_policy", cache=False), "fire_once")
		finally:
			frappe.db.delete("Singles", {"doctype": CONFIG})
			for field, value in saved:
				frappe.db.sql("insert into `tabSingles` (doctype, field, value) values (%s, %s, %s)", (CONFIG, field, value))
			frappe.db.set_value("Role", "BTU Manager", "desk_access", desk_access)
			frappe.db.commit()  # after_install committed the defaults: so is the site's own state put back
			frappe.db.value_cache.pop(CONFIG, None)
