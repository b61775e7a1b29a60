"""The upgrade from the original BTU (Datahenge's), run on tables shaped as the original left them.

The original's columns are described here as data, in our words (shared/research/btu_anchor.md section 1; the
schedule's `cron_timezone` from its v15.2 scheduler's SQL), never copied from its code. Each test builds scratch
tables with them, runs the patch before the sync, syncs the tables to this BTU's DocTypes with Frappe's own schema
code (what `bench migrate` does to the real tables), runs the patch after it, and compares.
"""

from __future__ import annotations

import io
import socket
import tempfile
import time
from contextlib import redirect_stdout
from datetime import datetime, timezone
from pathlib import Path
from unittest import mock
from zoneinfo import ZoneInfo

import frappe
from croniter import croniter
from frappe.database.mariadb.schema import MariaDBTable
from frappe.utils.background_jobs import get_redis_conn

from btu.btu_core import api
from btu.btu_core.tests.utils import sealed_value
from btu.btu_core.upgrade import declare, hours, rows, run_later
from btu.btu_core.upgrade.tables import Tables
from btu.btu_core.upgrade.undeclared import undeclared
from btu.shared import old_daemon
from btu.shared.schedule import ScheduleSpec
from btu.shared.schedule.row import SPEC_FIELDS

try:
	from frappe.tests import IntegrationTestCase
except ImportError:
	from frappe.tests.utils import FrappeTestCase as IntegrationTestCase

SAMPLES = "btu.btu_core.tests.sample_tasks"
# A function of btu that no app declares runnable, outside its tests (a declaration of a test fixture would not make it
# run on a production site).
UNDECLARED = "btu.btu_core.instants.utc_now"
SCRATCH = Tables(
	task="tabBTU Upgrade Test Task", schedule="tabBTU Upgrade Test Schedule", log="tabBTU Upgrade Test Log"
)
DOCTYPES = {SCRATCH.task: "BTU Task", SCRATCH.schedule: "BTU Task Schedule", SCRATCH.log: "BTU Task Log"}
SYSTEM_ZONE = "America/New_York"
# A moment before the US switch to summer time (2026-03-08): the next five fires cross it.
NOW = datetime(2026, 3, 5, 15, 0, tzinfo=timezone.utc)

STANDARD = (
	"name varchar(140) primary key, creation datetime(6), modified datetime(6), modified_by varchar(140), "
	"owner varchar(140), docstatus int not null default 0, idx int not null default 0"
)
# The original's columns (version-15 branch) as Frappe made them (Int and Check not null with their defaults): a
# submittable Task whose v15 form marks transient Tasks with a Check; a schedule's hour is text.
ORIGINAL_COLUMNS = {
	SCRATCH.task: (
		"desc_short varchar(140), task_group varchar(140), last_runtime datetime(6), desc_long text, "
		"function_string varchar(140), arguments text, queue_name varchar(140), "
		"max_task_duration int(11) not null default 600, repeat_log_in_stdout int(1) not null default 0, "
		"run_only_as_worker int(1) not null default 0, amended_from varchar(140), "
		"is_transient int(1) not null default 0"
	),
	SCRATCH.schedule: (
		"task varchar(140), task_description varchar(140), enabled int(1) not null default 0, queue_name varchar(140), "
		"redis_job_id varchar(140), argument_overrides longtext, cron_string varchar(140), "
		"schedule_description varchar(140), run_frequency varchar(140), day_of_week varchar(140), "
		"day_of_month int(11) not null default 0, month varchar(140), hour varchar(140), "
		"minute int(11) not null default 0"
	),
	SCRATCH.log: (
		"task varchar(140), task_desc_short varchar(140), task_component varchar(140), date_time_started datetime(6), "
		"execution_time decimal(21,9) not null default 0, success_fail varchar(140), result_message text, "
		"stdout longtext, `schedule` varchar(140)"
	),
}
# From v15.2 a schedule has its own zone, read before BTU Configuration's cron_time_zone.
LOCAL_SCHEMA_COLUMN = "cron_timezone varchar(140)"

TASKS = [
	# name, docstatus, function, arguments, is_transient
	("BTU-00001", 1, f"{SAMPLES}.say_hello", "{'name': 'Ada', 'punctuation': '?'}", 0),
	("BTU-00002", 0, "site_app.tasks.nightly", "{'ids': {1, 2}}", 0),
	("BTU-00003", 2, UNDECLARED, "", 0),
	("BTU-00004", 1, f"{SAMPLES}.needs_company", '{"company": "ACME"}', 1),
	# A function of the original app itself, gone with it.
	("BTU-00005", 1, "btu.manual_tests.ping_with_wait", "", 0),
]
LOGS = [
	("BTLOG-1", "Success"),
	("BTLOG-2", "Failed"),
	("BTLOG-3", "Timeout"),
	("BTLOG-4", "In-Progress"),
	("BTLOG-5", "Crashed"),
]


def original_fires(cron: str, zone: str) -> list[datetime]:
	"""The next five fires as the original computed them: croniter (6.1 or later, as it required) on the zone's wall
	clock (UTC before v15.2). Stepped here on the naive wall clock, which the bench's older croniter steps right too
	(its aware stepping is off by an hour after a DST change), then placed in the zone; no fire here is in a gap."""
	it = croniter(cron, NOW.astimezone(ZoneInfo(zone)).replace(tzinfo=None))
	return [it.get_next(datetime).replace(tzinfo=ZoneInfo(zone)).astimezone(timezone.utc) for _ in range(5)]


class UpgradeCase(IntegrationTestCase):
	local_schema = False
	config_zone = "UTC"
	schedules: list[tuple] = []  # name, task, frequency, cron_string, hour, minute, argument_overrides, cron_timezone

	def setUp(self):
		self.drop()
		for table, columns in ORIGINAL_COLUMNS.items():
			extra = f", {LOCAL_SCHEMA_COLUMN}" if self.local_schema and table == SCRATCH.schedule else ""
			frappe.db.sql_ddl(f"create table `{table}` ({STANDARD}, {columns}{extra})")
		for name, docstatus, function, arguments, transient in TASKS:
			self.insert(
				SCRATCH.task,
				name=name,
				docstatus=docstatus,
				desc_short=name,
				function_string=function,
				arguments=arguments,
				queue_name="default",
				is_transient=transient,
			)
		for name, task, frequency, cron, hour, minute, overrides, zone in self.schedules:
			values = dict(
				name=name,
				task=task,
				enabled=1,
				queue_name="default",
				redis_job_id="",
				run_frequency=frequency,
				cron_string=cron,
				hour=hour,
				minute=minute,
				argument_overrides=overrides,
			)
			self.insert(SCRATCH.schedule, **values, **({"cron_timezone": zone} if self.local_schema else {}))
		for name, status in LOGS:
			self.insert(
				SCRATCH.log,
				name=name,
				task="BTU-00001",
				success_fail=status,
				stdout="<p>hello</p>",
				date_time_started="2026-03-01 09:00:00",
			)
		frappe.db.commit()

	def tearDown(self):
		self.drop()

	def drop(self):
		for table in DOCTYPES:
			frappe.db.sql_ddl(f"drop table if exists `{table}`")
		frappe.cache.delete_value("db_tables")

	def insert(self, table, **values):
		frappe.db.sql(
			f"insert into `{table}` ({', '.join(f'`{k}`' for k in values)}) values ({', '.join(['%s'] * len(values))})",
			tuple(values.values()),
		)

	def migrate(self) -> list[dict]:
		"""What `bench migrate` does to the tables: the patch before the sync, the sync, the patch after it."""
		found = hours.convert(SCRATCH)
		frappe.db.commit()
		frappe.cache.delete_value("db_tables")
		for table, doctype in DOCTYPES.items():
			schema = MariaDBTable(doctype)
			schema.table_name = table
			schema.validate()  # reads the table's columns, as updatedb does first
			schema.sync()
			frappe.db.commit()
		bad_hours = {n["name"] for n in found if n["field"] == "hour"}
		found += rows.convert(SCRATCH, config_zone=self.config_zone, system_zone=SYSTEM_ZONE, bad_hours=bad_hours)
		frappe.db.commit()
		return found

	def snapshot(self) -> dict:
		return {table: frappe.db.sql(f"select * from `{table}` order by name", as_dict=True) for table in DOCTYPES}

	def fires(self, name: str) -> list[datetime]:
		row = frappe.db.sql(f"select * from `{SCRATCH.schedule}` where name = %s", name, as_dict=True)[0]
		return ScheduleSpec.from_row(
			{field: row.get(field) for field in SPEC_FIELDS}, system_time_zone=SYSTEM_ZONE
		).preview(5, NOW)

	def check_common(self, found: list[dict]):
		after = self.snapshot()
		self.assertEqual([r.name for r in after[SCRATCH.task]], [t[0] for t in TASKS])
		self.assertEqual({r.name: r.queue_name for r in after[SCRATCH.task]}, {t[0]: "default" for t in TASKS})
		self.assertEqual([r.name for r in after[SCRATCH.schedule]], sorted(s[0] for s in self.schedules))
		self.assertEqual([r.name for r in after[SCRATCH.log]], [n for n, _ in LOGS])
		tasks = {r.name: r for r in after[SCRATCH.task]}
		self.assertEqual({r.docstatus for r in tasks.values()}, {0})
		self.assertEqual(frappe.parse_json(tasks["BTU-00001"].arguments), {"name": "Ada", "punctuation": "?"})
		self.assertEqual(tasks["BTU-00002"].arguments, "{'ids': {1, 2}}")  # kept, and listed
		self.assertEqual(tasks["BTU-00004"].task_type, "Subtask")
		self.assertEqual(tasks["BTU-00001"].task_type, "Persistent")
		logs = {r.name: (r.status, r.success_fail) for r in after[SCRATCH.log]}
		self.assertEqual(
			logs,
			{
				"BTLOG-1": ("Succeeded", "Success"),
				"BTLOG-2": ("Failed", "Failed"),
				"BTLOG-3": ("Timed Out", "Timeout"),
				"BTLOG-4": ("Started", "In-Progress"),
				"BTLOG-5": ("Failed", "Crashed"),
			},
		)
		self.assertEqual({r.stdout for r in after[SCRATCH.log]}, {"<p>hello</p>"})
		listed = undeclared(SCRATCH)
		self.assertEqual(
			[(t["task"], t["function_string"], t["hook_line"]) for t in listed],
			[
				("BTU-00002", "site_app.tasks.nightly", ""),
				("BTU-00003", UNDECLARED, f'btu_tasks = ["{UNDECLARED}"]'),
				("BTU-00005", "btu.manual_tests.ping_with_wait", ""),
			],
		)
		self.assertEqual(listed[1]["hooks_file"], "btu/hooks.py")
		self.assertIn("site_app", listed[0]["reason"])
		self.assertIn("btu.manual_tests", listed[2]["reason"])
		# An app's declared schedule, synced after the patches, is this BTU's own: a second run leaves it alone.
		self.insert(
			SCRATCH.schedule,
			name="TS-DECLARED",
			task="BTU-00001",
			run_frequency="Daily",
			hour=3,
			minute=17,
			declared_by_app="btu",
			time_zone="",
		)
		frappe.db.commit()
		after = self.snapshot()
		# Migrate again: nothing changes, nothing new is listed.
		self.assertEqual([n for n in self.migrate() if n not in found], [])
		self.assertEqual(self.snapshot(), after)
		return {(n["doctype"], n["name"], n["field"]) for n in found}


class TestUpgradeFromUTCSchema(UpgradeCase):
	"""Before v15.2: cron_string in UTC, helpers saved as a UTC cron with the day's offset."""

	schedules = [
		("TS-000001", "BTU-00001", "Cron Style", "30 14 * * *", "", 0, "", None),
		("TS-000002", "BTU-00001", "Cron Style", "*/20 * * * *", None, 0, "{'punctuation': '!'}", None),
		# Daily 08:05 New York, saved in winter (UTC-5): the original's cron 5 13 * * *.
		("TS-000003", "BTU-00004", "Daily", "5 13 * * *", "8", 5, "", None),
		("TS-000004", "BTU-00001", "Weekly", "0 14 * * 1", "9am", 0, "", None),
		("TS-000005", "BTU-00002", "Cron Style", "0 9 * * 1-5", "", 0, "", None),
	]

	def test_rows_kept_fires_unchanged_undeclared_listed_second_migrate_noop(self):
		found = self.migrate()
		self.assertEqual(self.fires("TS-000001"), original_fires("30 14 * * *", "UTC"))
		self.assertEqual(self.fires("TS-000002"), original_fires("*/20 * * * *", "UTC"))
		self.assertEqual(self.fires("TS-000005"), original_fires("0 9 * * 1-5", "UTC"))
		# A helper keeps its local time: the original's UTC moments until the switch (March 8), then 08:05 New York
		# still, where the original's frozen offset fired an hour late.
		helper = self.fires("TS-000003")
		self.assertEqual(helper[:2], original_fires("5 13 * * *", "UTC")[:2])
		self.assertNotEqual(helper[2], original_fires("5 13 * * *", "UTC")[2])
		self.assertEqual({f.astimezone(ZoneInfo(SYSTEM_ZONE)).strftime("%H:%M") for f in helper}, {"08:05"})
		schedule = {r.name: r for r in self.snapshot()[SCRATCH.schedule]}
		self.assertEqual(frappe.parse_json(schedule["TS-000002"].argument_overrides), {"punctuation": "!"})
		self.assertEqual((schedule["TS-000004"].paused, schedule["TS-000004"].hour), (1, 0))
		self.assertEqual(self.check_common(found), {
			("BTU Task", "BTU-00002", "arguments"),
			("BTU Task", "BTU-00003", "docstatus"),
			("BTU Task Log", "logs with success_fail 'Crashed'", "success_fail"),
			("BTU Task Schedule", "TS-000003", "next fires"),  # the original's frozen offset
			("BTU Task Schedule", "TS-000004", "hour"),
			("BTU Task Schedule", "TS-000004", "cron_string"),  # a Weekly's cron names its weekday
			("BTU Task Schedule", "TS-000004", "next fires"),
			("BTU Task Schedule", "TS-000005", "cron_string"),
			("BTU Task Schedule", "TS-000005", "next fires"),  # the Rust daemon's 1-5 was Sunday to Thursday
		})  # fmt: skip
		listed = {n["name"]: n["note"] for n in found if n["field"] == "next fires"}
		# The original's 13:05 UTC was 09:05 in New York's summer, where BTU keeps 08:05.
		self.assertRegex(
			listed["TS-000003"], r"original BTU's \w{3} [\d-]+ 13:05 \(\w{3} 09:05\).*BTU's \w{3} [\d-]+ 12:05 "
		)
		self.assertIn("For the original's moments make it Cron Style '5 13 * * *' in UTC", listed["TS-000003"])


class TestUpgradeFromLocalSchema(UpgradeCase):
	"""From v15.2: cron_string local in the schedule's cron_timezone, else BTU Configuration's cron_time_zone."""

	local_schema = True
	config_zone = "Europe/Berlin"
	schedules = [
		("TS-000011", "BTU-00001", "Cron Style", "45 6 * * 1-5", "", 0, "", "America/Chicago"),
		("TS-000012", "BTU-00004", "Cron Style", "0 18 * * *", "", 0, "", ""),
		("TS-000013", "BTU-00001", "Daily", "0 7 * * *", "7", 0, "", "Asia/Kolkata"),
	]

	def test_rows_kept_fires_unchanged_undeclared_listed_second_migrate_noop(self):
		found = self.migrate()
		self.assertEqual(self.fires("TS-000011"), original_fires("45 6 * * 1-5", "America/Chicago"))
		self.assertEqual(self.fires("TS-000012"), original_fires("0 18 * * *", "Europe/Berlin"))
		self.assertEqual(self.fires("TS-000013"), original_fires("0 7 * * *", "Asia/Kolkata"))
		self.assertEqual(self.check_common(found), {
			("BTU Task", "BTU-00002", "arguments"),
			("BTU Task", "BTU-00003", "docstatus"),
			("BTU Task Log", "logs with success_fail 'Crashed'", "success_fail"),
		})  # fmt: skip


class TestRunLaterBecomesRunRequests(IntegrationTestCase):
	"""v13's Run Later entries, hashes in the queue Redis, become pending Enqueue run requests; the key goes once
	its request is committed, so the next site's migrate (or a second one) finds nothing."""

	PATTERN = "btu_scheduler:run_later:upgradetest*"

	def setUp(self):
		self.redis = get_redis_conn()
		self.keys = {
			"good": "btu_scheduler:run_later:upgradetest1",
			"bad": "btu_scheduler:run_later:upgradetest2",
			"done": "btu_scheduler:run_later:upgradetest3",
		}
		common = {"target_queue": "short", "not_before_time": "2026-12-01T09:30:00+00:00", "status": "pending"}
		self.redis.hset(
			self.keys["good"],
			mapping={
				**common,
				"uid": "upgradetest1",
				"short_name": "hello later",
				"path_to_function": f"{SAMPLES}.say_hello",
				"arguments": '{"name": "later"}',
			},
		)
		self.redis.hset(
			self.keys["bad"],
			mapping={
				**common,
				"uid": "upgradetest2",
				"path_to_function": f"{SAMPLES}.say_hello",
				"arguments": "{'name': 'py'}",
			},
		)
		self.redis.hset(
			self.keys["done"],
			mapping={**common, "uid": "upgradetest3", "path_to_function": f"{SAMPLES}.say_hello", "status": "done"},
		)

	def tearDown(self):
		self.redis.delete(*self.keys.values())
		frappe.db.delete("BTU Run Request", {"note": ("like", "From the original BTU's Run Later%")})
		frappe.db.commit()

	def test_pending_entries_become_requests_once(self):
		found = run_later.convert(self.redis, self.PATTERN)
		requests = frappe.get_all(
			"BTU Run Request",
			{"note": ("like", "From the original BTU's Run Later%")},
			["name", "status", "origin", "method", "queue", "run_at_utc", "run_as"],
		)
		for request in requests:
			request.kwargs = sealed_value("BTU Run Request", request.pop("name"), "kwargs")
		self.assertEqual(len(requests), 1)
		self.assertEqual(
			dict(requests[0]),
			{
				"status": "Pending",
				"origin": "Enqueue",
				"method": f"{SAMPLES}.say_hello",
				"kwargs": '{"name": "later"}',
				"queue": "short",
				"run_at_utc": "2026-12-01T09:30:00Z",
				"run_as": "Administrator",
			},
		)
		self.assertEqual([(n["name"], n["field"]) for n in found], [(self.keys["bad"], "arguments")])
		self.assertEqual([bool(self.redis.exists(self.keys[k])) for k in ("good", "bad", "done")], [False, True, True])
		self.assertEqual(run_later.convert(self.redis, self.PATTERN), found)
		self.assertEqual(
			frappe.db.count("BTU Run Request", {"note": ("like", "From the original BTU's Run Later%")}), 1
		)


class TestOriginalDaemonShownInStatus(IntegrationTestCase):
	"""BTU Configuration's status panel (api.status) says when the original's daemon still takes fires from the
	bench's queue Redis, so the admin stops it before both fire a schedule."""

	def tearDown(self):
		get_redis_conn().delete(old_daemon.NEXT_FIRES_KEY)

	def test_status_names_a_running_original_daemon(self):
		redis_conn = get_redis_conn()
		redis_conn.delete(old_daemon.NEXT_FIRES_KEY)
		self.assertIsNone(api.status()["original_btu"])
		ahead = time.time() + 600
		redis_conn.zadd(old_daemon.NEXT_FIRES_KEY, {f"TS-000001|{int(ahead)}": ahead})
		self.assertIn("may still be running", api.status()["original_btu"])

	def test_status_names_an_original_daemon_on_its_socket(self):
		get_redis_conn().delete(old_daemon.NEXT_FIRES_KEY)
		with tempfile.TemporaryDirectory() as folder, socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as server:
			path = f"{folder}/btu_scheduler.sock"
			server.bind(path)
			server.listen(1)
			# The original BTU Configuration's field, left in tabSingles by the upgrade (rolled back after the test).
			frappe.db.sql(
				"insert into tabSingles (doctype, field, value) values ('BTU Configuration', "
				"'path_to_btu_scheduler_uds', %s)",
				path,
			)
			self.assertEqual(
				api.status()["original_btu"],
				f"the original BTU's daemon listens on {path}: stop it (systemctl stop btu_scheduler) so no schedule "
				"fires twice",
			)


class TestDeclareTasksCommand(IntegrationTestCase):
	"""`bench btu-declare-tasks --app APP`: the btu_tasks block of APP's functions its Tasks run undeclared."""

	def setUp(self):
		task = frappe.get_doc(
			{
				"doctype": "BTU Task",
				"desc_short": "upgraded",
				"function_string": UNDECLARED,
				"queue_name": "default",
			}
		)
		task.set_new_name()
		task.db_insert()  # as the upgrade leaves it: saved by the original, which ran any function
		self.task = task.name

	def tearDown(self):
		frappe.db.rollback()

	def run_declare(self, hooks_text: str, write: bool, app: str = "btu", yours=("btu",)) -> tuple[int, str, str]:
		"""declare(app) against a hooks.py of `hooks_text`; btu stands for the site's own app (`yours`): the test
		site has no other app whose Tasks may run undeclared functions."""
		with tempfile.TemporaryDirectory() as folder:
			hooks = Path(folder) / "hooks.py"
			hooks.write_text(hooks_text)
			output = io.StringIO()
			not_yours = tuple(name for name in declare.NOT_YOURS if name not in yours)
			with (
				mock.patch("frappe.get_app_path", return_value=str(hooks)),
				mock.patch.object(declare, "NOT_YOURS", not_yours),
				redirect_stdout(output),
			):
				code = declare.declare(app, write=write)
			return code, output.getvalue(), hooks.read_text()

	def test_frappes_and_btus_own_hooks_are_refused(self):
		for app in ("frappe", "btu"):
			with self.subTest(app=app):
				code, printed, written = self.run_declare('app_name = "x"\n', write=True, app=app, yours=())
				self.assertEqual((code, written), (1, 'app_name = "x"\n'))
				self.assertIn(f"{app}'s hooks.py is not yours to edit", printed)
				self.assertIn(f"BTU Task {self.task} runs {UNDECLARED}, which no app declares", printed)
				self.assertNotIn("btu_tasks = [", printed)  # neither a block nor a hint to write one

	def test_a_test_fixture_is_never_offered_a_declaration(self):
		"""It would run on test sites only (allow_tests): declaring it would not make an upgraded site run it."""
		frappe.db.set_value("BTU Task", self.task, "function_string", f"{SAMPLES}.undeclared_task")
		code, printed, _ = self.run_declare('app_name = "btu"\n', write=False)
		self.assertEqual(code, 0)
		self.assertIn(
			f"# btu's, but no declaration makes it run: BTU Task {self.task}: function_string "
			f"'{SAMPLES}.undeclared_task': is in {SAMPLES}, a test module of app btu",
			printed,
		)
		self.assertNotIn("btu_tasks = [", printed)  # neither a block nor a hint to write one

	def test_an_own_function_no_declaration_can_help_is_named(self):
		"""A Task of the original BTU's own module, gone in this one: not "no undeclared function"."""
		frappe.db.set_value("BTU Task", self.task, "function_string", "btu.manual_tests.ping_with_wait")
		code, printed, _ = self.run_declare('app_name = "btu"\n', write=False)
		self.assertEqual(code, 0)
		self.assertIn(f"# btu's, but no declaration makes it run: BTU Task {self.task}:", printed)
		self.assertIn("none of btu's functions a Task runs can be declared", printed)
		self.assertNotIn("no undeclared function", printed)

	def test_prints_or_appends_the_block_and_never_a_second_btu_tasks(self):
		code, printed, _ = self.run_declare('app_name = "btu"\n', write=False)
		self.assertEqual(code, 0)
		self.assertIn(f'"{UNDECLARED}",', printed)
		code, _, written = self.run_declare('app_name = "btu"\n', write=True)
		self.assertEqual(code, 0)
		namespace = {}
		exec(compile(written, "hooks.py", "exec"), namespace)
		self.assertIn(UNDECLARED, namespace["btu_tasks"])
		code, printed, written = self.run_declare('btu_tasks = ["btu.x.*"]\n', write=True)
		self.assertEqual((code, written), (1, 'btu_tasks = ["btu.x.*"]\n'))
		self.assertIn("add these entries to it by hand", printed)
