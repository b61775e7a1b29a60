import frappe

try:
	from frappe.tests import IntegrationTestCase
except ImportError:
	from frappe.tests.utils import FrappeTestCase as IntegrationTestCase


class TestBTUConfiguration(IntegrationTestCase):
	def test_default_time_zone_must_be_known(self):
		config = frappe.get_single("BTU Configuration")
		config.default_time_zone = "Mars/Olympus_Mons"
		with self.assertRaises(frappe.ValidationError) as caught:
			config.save()
		self.assertIn("default_time_zone 'Mars/Olympus_Mons'", str(caught.exception))

	def test_install_left_defaults_and_role(self):
		self.assertTrue(frappe.db.exists("Role", "BTU Manager"))
		self.assertEqual(frappe.db.get_value("Role", "BTU Manager", "desk_access"), 1)
		self.assertEqual(frappe.db.get_single_value("BTU Configuration", "enabled"), 1)
		self.assertEqual(frappe.db.get_single_value("BTU Configuration", "default_catch_up_policy"), "fire_once")
