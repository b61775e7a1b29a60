"""The Frappe side on a Redis shared by benches: `btu_namespace` names its keys, and a sharing without it is shown."""

import json

import frappe

from btu.btu_core import api, scheduler_link
from btu.shared import protocol
from btu.shared.keys import NAMESPACE_SETTING

try:
	from frappe.tests import IntegrationTestCase
except ImportError:
	from frappe.tests.utils import FrappeTestCase as IntegrationTestCase


class TestNamespace(IntegrationTestCase):
	def setUp(self):
		self.had = frappe.local.conf.get(NAMESPACE_SETTING)

	def tearDown(self):
		frappe.local.conf.pop(NAMESPACE_SETTING, None)
		if self.had is not None:
			frappe.local.conf[NAMESPACE_SETTING] = self.had

	def test_commands_and_reads_use_the_benchs_namespace(self):
		frappe.local.conf[NAMESPACE_SETTING] = "tier2-bench"
		conn, keys = scheduler_link.queue_redis(), scheduler_link.bench_keys()
		key = "btu@tier2-bench:scheduler:commands"
		conn.delete(key)
		reply = protocol.call(conn, keys, protocol.PING, timeout=0.2)  # nobody listens under this namespace
		self.assertEqual(reply.outcome, "unreachable")
		[command] = conn.lrange(key, 0, -1)
		self.assertTrue(json.loads(command)["response_key"].startswith("btu@tier2-bench:scheduler:rpc:"))
		conn.delete(key)
		self.assertEqual(keys.leader, "btu@tier2-bench:scheduler:leader")

	def test_a_wrong_namespace_is_refused_naming_the_setting(self):
		frappe.local.conf[NAMESPACE_SETTING] = "no spaces/please"
		with self.assertRaises(frappe.ValidationError) as caught:
			scheduler_link.send(protocol.PING)
		self.assertIn(NAMESPACE_SETTING, str(caught.exception))
		self.assertIn("common_site_config.json", str(caught.exception))


class TestSharingShown(IntegrationTestCase):
	def setUp(self):
		self.conn, self.keys = scheduler_link.queue_redis(), scheduler_link.bench_keys()
		self.ids = ["tier2-a:1:x", "tier2-b:2:y"]
		for process_id, path, sites in zip(self.ids, ("/srv/bench-a", "/srv/bench-b"), (["aaa"], ["bbb"])):
			info = {
				"id": process_id,
				"host": process_id.split(":")[0],
				"role": "standby",
				"bench": {"id": path.strip("/").replace("/", "-"), "path": path, "sites": sites},
			}
			self.conn.set(self.keys.process_key(process_id), json.dumps(info), ex=60)
			self.conn.zadd(self.keys.processes, {process_id: 1})

	def tearDown(self):
		for process_id in self.ids:
			self.conn.delete(self.keys.process_key(process_id))
			self.conn.zrem(self.keys.processes, process_id)

	def test_the_status_panel_names_both_benches_and_the_fix(self):
		shown = api.status()
		self.assertEqual(sorted(b["path"] for b in shown["shared_redis"]), ["/srv/bench-a", "/srv/bench-b"])
		self.assertIn(NAMESPACE_SETTING, shown["shared_redis_message"])
		self.assertIn("/srv/bench-b", shown["shared_redis_message"])

	def test_processes_of_one_bench_on_two_hosts_are_not_a_sharing(self):
		info = json.loads(self.conn.get(self.keys.process_key(self.ids[1])))
		info["bench"] = {"id": "srv-bench-a", "path": "/srv/bench-a", "sites": ["aaa", "ccc"]}
		self.conn.set(self.keys.process_key(self.ids[1]), json.dumps(info), ex=60)
		self.assertEqual(api.status()["shared_redis"], [])
