import frappe

from btu.btu_core.schedules import scheduled_job_types
from btu.btu_core.setup import install
from btu.btu_core.tests.utils import make_user

try:
	from frappe.tests import IntegrationTestCase
except ImportError:
	from frappe.tests.utils import FrappeTestCase as IntegrationTestCase


CONFIG = "BTU Configuration"
MANAGER = "btu-config-manager@example.com"
SYSTEM_MANAGER = "btu-config-system-manager@example.com"


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
				frappe.db.sql(
					"insert into `tabSingles` (doctype, field, value) values (%s, %s, %s)", (CONFIG, field, value)
				)
			frappe.db.set_value("Role", "BTU Manager", "desk_access", desk_access)
			frappe.db.commit()  # after_install committed the defaults: so is the site's own state put back
			frappe.db.value_cache.pop(CONFIG, None)


class WithBothManagers(IntegrationTestCase):
	"""A BTU Manager (MANAGER) and a System Manager who is not Administrator (SYSTEM_MANAGER), committed."""

	@classmethod
	def setUpClass(cls):
		super().setUpClass()
		make_user(MANAGER, ("BTU Manager",))
		make_user(SYSTEM_MANAGER, ("System Manager",))
		frappe.db.commit()


class TestWhoMaySwitchFrappesJobs(WithBothManagers):
	"""Who fires Frappe's own jobs (backups, email, ERPNext's) is a System Manager's choice: a mistake stops them
	site-wide."""

	def setUp(self):
		self.stored = frappe.db.get_single_value(CONFIG, scheduled_job_types.SWITCH) or 0
		self.environment_name = frappe.db.get_single_value(CONFIG, "environment_name")
		self.default_time_zone = frappe.db.get_single_value(CONFIG, "default_time_zone")

	def tearDown(self):
		frappe.set_user("Administrator")
		frappe.db.rollback()
		frappe.db.set_single_value(
			CONFIG,
			{
				scheduled_job_types.SWITCH: self.stored,
				"environment_name": self.environment_name,
				"default_time_zone": self.default_time_zone,
			},
		)
		frappe.db.commit()

	def flipped(self):
		config = frappe.get_single(CONFIG)
		config.fire_frappe_jobs = 0 if self.stored else 1
		return config

	def test_a_btu_manager_changing_the_switch_is_refused_naming_the_field_and_who_may(self):
		frappe.set_user(MANAGER)
		config = frappe.get_single(CONFIG)
		self.assertFalse(config.has_permlevel_access_to(scheduled_job_types.SWITCH, permission_type="write"))
		self.assertTrue(config.has_permlevel_access_to(scheduled_job_types.SWITCH, permission_type="read"))
		for ignore_permissions in (False, True):
			with (
				self.subTest(ignore_permissions=ignore_permissions),
				self.assertRaises(frappe.PermissionError) as caught,
			):
				self.flipped().save(ignore_permissions=ignore_permissions)
			message = str(caught.exception)
			self.assertIn("fire_frappe_jobs", message)
			self.assertIn("System Manager", message)
			self.assertIn(MANAGER, message)
		self.assertEqual(frappe.db.get_single_value(CONFIG, scheduled_job_types.SWITCH) or 0, self.stored)
		# The rest of the configuration is still theirs.
		config = frappe.get_single(CONFIG)
		config.default_time_zone = "UTC"
		config.save()
		self.assertEqual(frappe.db.get_single_value(CONFIG, "default_time_zone"), "UTC")

	def test_a_system_manager_may_change_it(self):
		frappe.set_user(SYSTEM_MANAGER)
		self.flipped().save()
		self.assertEqual(frappe.db.get_single_value(CONFIG, scheduled_job_types.SWITCH) or 0, 0 if self.stored else 1)


class TestWhoMayShortenRetention(WithBothManagers):
	"""Who shortens the log retention deletes: the daily job then removes Logs and Run Requests older than it, a System
	Manager's enqueued runs' among them, which a BTU Manager may neither read nor delete."""

	def setUp(self):
		self.stored = frappe.db.get_single_value(CONFIG, "log_retention_days")
		kept = {
			field: frappe.db.get_single_value(CONFIG, field) for field in ("log_retention_days", "default_time_zone")
		}
		self.addCleanup(frappe.db.commit)
		self.addCleanup(frappe.db.set_single_value, CONFIG, kept)
		self.addCleanup(frappe.set_user, "Administrator")

	def test_a_btu_manager_is_refused_on_every_path(self):
		from frappe import client

		frappe.set_user(MANAGER)
		config = frappe.get_single(CONFIG)
		self.assertFalse(config.has_permlevel_access_to("log_retention_days", permission_type="write"))
		attempts = {
			"frappe.client.set_value": lambda: client.set_value(CONFIG, CONFIG, "log_retention_days", 1),
			"frappe.client.save": lambda: client.save({**config.as_dict(), "log_retention_days": 1}),
			"save(ignore_permissions=True)": lambda: (
				frappe.get_single(CONFIG).update({"log_retention_days": 1}).save(ignore_permissions=True)
			),
			"as text, by REST": lambda: frappe.get_single(CONFIG).update({"log_retention_days": "1"}).save(),
		}
		for path, attempt in attempts.items():
			with self.subTest(path=path):
				with self.assertRaises(frappe.PermissionError) as caught:
					attempt()
				self.assertIn("log_retention_days", str(caught.exception))
				self.assertIn("Ask a System Manager", str(caught.exception))
				frappe.db.rollback()
				self.assertEqual(frappe.db.get_single_value(CONFIG, "log_retention_days"), self.stored)

	def test_a_btu_manager_still_saves_the_rest_with_the_retention_unchanged(self):
		frappe.set_user(MANAGER)
		config = frappe.get_single(CONFIG)
		config.log_retention_days = str(self.stored)  # the same value, as text (a REST body's)
		config.default_time_zone = "UTC"
		config.save()
		self.assertEqual(frappe.db.get_single_value(CONFIG, "default_time_zone"), "UTC")

	def test_a_system_manager_shortens_it(self):
		frappe.set_user(SYSTEM_MANAGER)
		config = frappe.get_single(CONFIG)
		config.log_retention_days = 1
		config.save()
		self.assertEqual(frappe.db.get_single_value(CONFIG, "log_retention_days"), 1)
