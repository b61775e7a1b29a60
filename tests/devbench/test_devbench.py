"""Dev benches against the machine's real MariaDB: layout, schema, idempotence, drop."""

from __future__ import annotations

import json
import subprocess
import sys
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pymysql
import pytest

import btu
from btu.scheduler_daemon.reads import bench as bench_module
from btu.scheduler_daemon.reads import database
from btu.scheduler_daemon.reads.connections import Connections
from btu.shared import sealed
from devbench.bench import DEMO_APP_SOURCE, DevBenchInputError, create_dev_bench, database_name, drop_dev_bench
from devbench.data import SiteData, SiteDataError
from devbench.schema import NO_VALUE_FIELDS, column_type, load_doctypes
from tests.support.slack import patient

REPO = Path(__file__).resolve().parents[2]


def connect(site, **kwargs):
	params = site.db_params
	return pymysql.connect(
		host=params["host"],
		port=params["port"],
		user=params["user"],
		password=params["password"],
		database=params["database"],
		**kwargs,
	)


def root_connect(db_settings):
	return pymysql.connect(
		host=db_settings["db_host"],
		port=db_settings["db_port"],
		user=db_settings["db_root_user"],
		password=db_settings["db_root_password"],
	)


def columns(site, table: str) -> dict[str, tuple]:
	"""Column name -> (COLUMN_TYPE, IS_NULLABLE, COLUMN_DEFAULT) in table order."""
	with connect(site) as conn, conn.cursor() as cur:
		cur.execute(
			"SELECT COLUMN_NAME, COLUMN_TYPE, IS_NULLABLE, COLUMN_DEFAULT FROM information_schema.COLUMNS "
			"WHERE TABLE_SCHEMA=%s AND TABLE_NAME=%s ORDER BY ORDINAL_POSITION",
			(site.config["db_name"], table),
		)
		return {name: (coltype, nullable, default) for name, coltype, nullable, default in cur.fetchall()}


def tables(site) -> list[str]:
	with connect(site) as conn, conn.cursor() as cur:
		cur.execute("SHOW TABLES")
		return sorted(row[0] for row in cur.fetchall())


def test_bench_is_found_and_read_like_a_real_bench(make_bench, redis_url):
	bench = make_bench("one.localhost", "two.localhost", bench_id="devbench-test")
	deep = bench.path / "sites" / "one.localhost"
	assert bench_module.find_bench(deep) == bench.path
	loaded = bench_module.Bench.load(bench.path)
	assert loaded.site_names() == ["one.localhost", "two.localhost"]
	assert loaded.redis_queue_url == redis_url
	assert loaded.queue_name("default") == "devbench-test:default"
	# Installed as bench installs apps: listed in apps.txt, their source under apps/ (btu_demo is the dev bench's own
	# app, tests the tests' own app).
	assert (bench.path / "sites" / "apps.txt").read_text().split() == ["frappe", "btu", "btu_demo", "tests"]
	assert (bench.path / "apps" / "btu" / "btu" / "hooks.py").samefile(Path(btu.__file__).parent / "hooks.py")
	assert (bench.path / "apps" / "tests" / "tests" / "engine" / "tasks.py").is_file()
	# The demo's tasks are declared by the dev bench's own app, not by btu.
	assert (bench.path / "apps" / "btu_demo" / "btu_demo" / "hooks.py").samefile(
		DEMO_APP_SOURCE / "btu_demo" / "hooks.py"
	)
	for path in ("btu_demo.demo_tasks.say_hello", "btu_demo.demo_tasks.add"):
		loaded.app_files.check(path)
	names = set()
	for site in loaded.sites():
		assert site.db_type == "mariadb"
		assert site.config["db_name"].startswith("_btu")
		assert site.db_params["user"] == site.config["db_name"]
		names.add(site.config["db_name"])
		with connect(site) as conn, conn.cursor() as cur:
			cur.execute("SELECT DATABASE(), CURRENT_USER()")
			db, user = cur.fetchone()
		assert db == site.config["db_name"] and user.startswith(site.config["db_name"] + "@")
	assert len(names) == 2


def test_two_benches_never_share_a_database(make_bench):
	first, second = make_bench(), make_bench()
	assert first.site("site1.localhost").config["db_name"] != second.site("site1.localhost").config["db_name"]
	assert database_name(first.path, "a") != database_name(first.path, "b")


def test_tables_come_from_the_doctype_json(make_bench):
	site = make_bench().site("site1.localhost")
	schemas = load_doctypes()
	expected = sorted(
		["tabSingles", "tabSeries", "tabScheduled Job Type", sealed.TABLE]
		+ [s.table for s in schemas.values() if not s.issingle]
	)
	assert tables(site) == expected
	assert "tabBTU Configuration" not in expected  # a Single
	for schema in schemas.values():
		if schema.issingle:
			continue
		cols = columns(site, schema.table)
		value_fields = [df["fieldname"] for df in schema.fields if df["fieldtype"] not in NO_VALUE_FIELDS]
		standard = ["name", "creation", "modified", "modified_by", "owner", "docstatus", "idx"]
		tail = (
			["parent", "parentfield", "parenttype"]
			if schema.istable
			else ["_user_tags", "_comments", "_assign", "_liked_by"]
		)
		assert list(cols) == standard + value_fields + tail, schema.name
		for df in schema.fields:
			if df["fieldtype"] in NO_VALUE_FIELDS:
				assert df["fieldname"] not in cols
			else:
				assert cols[df["fieldname"]][0] == column_type(df["fieldtype"], df.get("precision"), df.get("length"))


def test_columns_follow_field_order_as_frappe_imports_a_doctype(make_bench):
	# DocType.prepare_for_import orders a DocType's fields by its JSON's field_order, whatever order "fields" has.
	site = make_bench().site("site1.localhost")
	for schema in load_doctypes().values():
		if schema.issingle:
			continue
		order = schema.meta.get("field_order") or []
		cols = [name for name in columns(site, schema.table) if name in order]
		assert cols == [name for name in order if name in cols], schema.name
	# BTU Run Request's "fields" list method after note; its field_order, and Frappe's table, before parent_log.
	cols = list(columns(site, "tabBTU Run Request"))
	assert cols.index("method") < cols.index("parent_log")


def test_column_types_are_frappe_v15s(make_bench):
	"""Literal types from frappe@version-15 frappe/database/mariadb/{database,schema}.py."""
	site = make_bench().site("site1.localhost")
	schedule = columns(site, "tabBTU Task Schedule")
	assert schedule["name"] == ("varchar(140)", "NO", None)
	assert schedule["creation"][0] == "datetime(6)"
	assert schedule["docstatus"] == ("int(1)", "NO", "0")
	assert schedule["idx"] == ("int(8)", "NO", "0")
	assert schedule["enabled"] == ("int(1)", "NO", "1")  # Check, default 1
	assert schedule["paused"] == ("int(1)", "NO", "0")
	assert schedule["catch_up_window"] == ("int(11)", "NO", "86400")  # Int
	assert schedule["every"] == ("int(11)", "NO", "0")  # Int without default
	assert schedule["run_frequency"] == ("varchar(140)", "YES", "'Daily'")  # Select
	assert schedule["task"] == ("varchar(140)", "YES", "NULL")  # Link
	assert schedule["run_at"] == ("datetime(6)", "YES", "NULL")  # Datetime
	assert schedule["pause_note"][0] == "text"  # Small Text
	assert schedule["argument_overrides"][0] == "longtext"  # Code
	assert schedule["_user_tags"][0] == "text"
	log = columns(site, "tabBTU Task Log")
	assert log["execution_time"] == ("decimal(21,9)", "NO", "0.000000000")  # Float
	recipient = columns(site, "tabBTU Email Recipient")
	assert recipient["parenttype"][0] == "varchar(140)"
	assert "_user_tags" not in recipient
	assert (
		column_type("Time") == "time(6)"
		and column_type("Date") == "date"
		and column_type("Duration") == "decimal(21,9)"
	)
	assert (
		column_type("Currency") == "decimal(21,9)"
		and column_type("Long Text") == "longtext"
		and column_type("JSON") == "json"
	)
	assert column_type("Int", length=20) == "bigint(20)" and column_type("Data", length=255) == "varchar(255)"
	assert column_type("Section Break") is None and column_type("Table") is None


def test_indexes_engine_and_charset(make_bench):
	site = make_bench().site("site1.localhost")
	with connect(site) as conn, conn.cursor() as cur:
		cur.execute(
			"SELECT TABLE_NAME, INDEX_NAME, COLUMN_NAME FROM information_schema.STATISTICS "
			"WHERE TABLE_SCHEMA=%s AND SEQ_IN_INDEX=1",
			(site.config["db_name"],),
		)
		indexes = {(t, i, c) for t, i, c in cur.fetchall()}
		cur.execute(
			"SELECT TABLE_NAME, ENGINE, ROW_FORMAT, TABLE_COLLATION FROM information_schema.TABLES "
			"WHERE TABLE_SCHEMA=%s",
			(site.config["db_name"],),
		)
		table_options = cur.fetchall()
	assert ("tabBTU Task Log", "task", "task") in indexes  # search_index
	assert ("tabBTU Task Log", "rq_job_id", "rq_job_id") in indexes
	assert ("tabBTU Task Schedule", "modified", "modified") in indexes
	assert ("tabBTU Email Recipient", "parent", "parent") in indexes
	assert ("tabSingles", "singles_doctype_field_index", "doctype") in indexes
	# From btu_task_log.py's on_doctype_update (frappe.db.add_index), named by get_index_name.
	assert ("tabBTU Task Log", "schedule_slot_utc_index", "schedule") in indexes
	assert ("tabBTU Task Log", "status_date_time_started_index", "status") in indexes
	for name, engine, row_format, collation in table_options:
		assert (engine, row_format, collation) == ("InnoDB", "Dynamic", "utf8mb4_unicode_ci"), name


def test_singles_the_scheduler_reads(make_bench):
	utc = SiteData(make_bench(), "site1.localhost")
	assert utc.get_single("System Settings", "time_zone") == "UTC"
	assert utc.get_single("BTU Configuration", "enabled") == "1"
	berlin = SiteData(make_bench(time_zone="Europe/Berlin"), "site1.localhost")
	assert berlin.get_single("System Settings", "time_zone") == "Europe/Berlin"
	utc.close()
	berlin.close()


def test_create_twice_keeps_tables_columns_and_data(make_bench, db_settings, redis_url):
	bench = make_bench()
	site = bench.site("site1.localhost")
	data = SiteData(bench, "site1.localhost")
	task = data.insert_task(desc_short="kept", function_string="btu.tests.noop")
	data.set_single("System Settings", "time_zone", "Asia/Tokyo")
	before_tables, before_cols = tables(site), {t: columns(site, t) for t in tables(site)}
	data.close()

	again = create_dev_bench(bench.path, ("site1.localhost",), redis_url=redis_url, **db_settings)
	site_again = again.site("site1.localhost")
	assert site_again.config == site.config  # same database, same password
	assert tables(site_again) == before_tables
	assert {t: columns(site_again, t) for t in before_tables} == before_cols
	with SiteData(again, "site1.localhost") as data:
		assert data.get("BTU Task", task)["desc_short"] == "kept"
		assert data.get_single("System Settings", "time_zone") == "Asia/Tokyo"


def test_create_again_adds_missing_columns_and_indexes(make_bench, db_settings, redis_url):
	bench = make_bench()
	site = bench.site("site1.localhost")
	with SiteData(bench, "site1.localhost") as data:
		task = data.insert_task(desc_short="old row", function_string="x.y")
	with connect(site, autocommit=True) as conn, conn.cursor() as cur:
		cur.execute("ALTER TABLE `tabBTU Task` DROP COLUMN `max_task_duration`")
		cur.execute("ALTER TABLE `tabBTU Task Log` DROP INDEX `task`")
		cur.execute("ALTER TABLE `tabBTU Task Log` DROP INDEX `status_date_time_started_index`")
	create_dev_bench(bench.path, ("site1.localhost",), redis_url=redis_url, **db_settings)
	assert (bench.path / "sites" / "apps.txt").read_text().split() == ["frappe", "btu", "btu_demo", "tests"], (
		"apps listed before stay"
	)
	assert columns(site, "tabBTU Task")["max_task_duration"] == ("int(11)", "NO", "600")
	with connect(site) as conn, conn.cursor() as cur:
		cur.execute("SHOW INDEX FROM `tabBTU Task Log` WHERE Column_name='task'")
		assert cur.fetchall()
		cur.execute("SHOW INDEX FROM `tabBTU Task Log` WHERE Key_name='status_date_time_started_index'")
		assert [row[4] for row in cur.fetchall()] == ["status", "date_time_started"]
	with SiteData(bench, "site1.localhost") as data:
		row = data.get("BTU Task", task)
	assert row["desc_short"] == "old row" and row["max_task_duration"] == 600


def test_drop_removes_databases_users_and_directory(make_bench, db_settings):
	bench = make_bench("a.localhost", "b.localhost")
	names = [site.config["db_name"] for site in bench.sites()]
	drop_dev_bench(
		bench.path, db_root_user=db_settings["db_root_user"], db_root_password=db_settings["db_root_password"]
	)
	assert not bench.path.exists()
	with root_connect(db_settings) as conn, conn.cursor() as cur:
		for name in names:
			assert not cur.execute("SHOW DATABASES LIKE %s", (name,))
			assert not cur.execute("SELECT 1 FROM mysql.user WHERE user=%s", (name,))
	drop_dev_bench(bench.path)  # already gone: nothing to do


def test_drop_refuses_a_directory_that_is_not_a_dev_bench(tmp_path):
	real = tmp_path / "frappe-bench"
	for marker in ("apps", "config", "env", "sites"):
		(real / marker).mkdir(parents=True)
	(real / "Procfile").write_text("web: bench serve\n")
	with pytest.raises(DevBenchInputError, match="not a dev bench"):
		drop_dev_bench(real)
	with pytest.raises(DevBenchInputError, match="not empty and not a dev bench"):
		create_dev_bench(real)
	assert (real / "Procfile").exists()


@pytest.mark.parametrize("name, source", [("my-app", "."), ("ghost", "."), ("os", "/")])
def test_an_app_that_is_not_a_package_directory_is_refused(tmp_path, db_settings, name, source):
	with pytest.raises(DevBenchInputError, match=f"app '{name}' from"):
		create_dev_bench(tmp_path / "b", apps={name: tmp_path / source}, **db_settings)
	assert not (tmp_path / "b").exists()


def test_bad_site_name_is_refused(tmp_path, db_settings):
	with pytest.raises(DevBenchInputError, match="site '../x'"):
		create_dev_bench(tmp_path / "b", ("../x",), **db_settings)


def test_site_data_rows_as_frappe_writes_them(make_bench):
	bench = make_bench(time_zone="America/New_York")
	with SiteData(bench, "site1.localhost") as data:
		task = data.insert_task(desc_short="Nightly", function_string="btu.demo.hello", arguments={"who": "world"})
		second = data.insert_task(desc_short="Second", function_string="btu.demo.hello")
		schedule = data.insert_schedule(task, run_frequency="Cron Style", cron_string="*/5 * * * *")
		assert (task, second, schedule) == ("BTU-00001", "BTU-00002", "TS-000001")
		row = data.get("BTU Task Schedule", schedule)
		# Defaults of the DocType, fetch_from, standard columns.
		assert (row["enabled"], row["paused"], row["catch_up_policy"], row["catch_up_window"]) == (
			1,
			0,
			"fire_once",
			86400,
		)
		assert row["task_description"] == "Nightly"
		assert row["owner"] == row["modified_by"] == "Administrator" and row["docstatus"] == 0
		new_york_now = (
			datetime.now(timezone.utc)
			.astimezone(__import__("zoneinfo").ZoneInfo("America/New_York"))
			.replace(tzinfo=None)
		)
		assert abs(row["creation"] - new_york_now) < timedelta(minutes=1)
		assert json.loads(data.get("BTU Task", task)["arguments"]) == {"who": "world"}
		assert data.get("BTU Task", task)["queue_name"] == "default"

		data.update_schedule(schedule, paused=True, cron_string="0 * * * *")
		updated = data.get("BTU Task Schedule", schedule)
		assert (updated["paused"], updated["cron_string"]) == (1, "0 * * * *")
		assert updated["modified"] >= row["modified"]

		with_recipients = data.insert_task(
			desc_short="Mail", function_string="x.y", email_recipients=[{"email_address": "ops@example.com"}]
		)
		with connect(bench.site("site1.localhost")) as conn, conn.cursor() as cur:
			cur.execute("SELECT parent, parentfield, parenttype, idx, email_on_error FROM `tabBTU Email Recipient`")
			assert cur.fetchall() == ((with_recipients, "email_recipients", "BTU Task", 1, 1),)

		data.delete_schedule(schedule)
		assert data.get("BTU Task Schedule", schedule) is None
		with pytest.raises(SiteDataError, match="has no field 'cron'"):
			data.insert_schedule(task, cron="* * * * *")
		with pytest.raises(SiteDataError, match="does not exist"):
			data.update_schedule("TS-999999", paused=1)


def test_scheduler_style_read_of_site_data(make_bench):
	"""Rows read back with the site's own recorded login, as the scheduler does."""
	bench = make_bench()
	with SiteData(bench, "site1.localhost") as data:
		task = data.insert_task(desc_short="t", function_string="a.b")
		names = [data.insert_schedule(task, run_frequency="Interval", every=5, every_unit="Seconds") for _ in range(3)]
	site = bench_module.Bench.load(bench.path).site("site1.localhost")
	with connect(site, cursorclass=pymysql.cursors.DictCursor) as conn, conn.cursor() as cur:
		cur.execute(
			"SELECT name, task, every, every_unit, enabled FROM `tabBTU Task Schedule` WHERE enabled=1 ORDER BY name"
		)
		rows = cur.fetchall()
	assert [r["name"] for r in rows] == names
	assert all((r["task"], r["every"], r["every_unit"]) == (task, 5, "Seconds") for r in rows)


def test_cli_makes_and_drops_a_dev_bench(tmp_path, db_settings, redis_url):
	path = tmp_path / "cli-bench"
	root = [
		"--db-host",
		db_settings["db_host"],
		"--db-port",
		str(db_settings["db_port"]),
		"--db-root-user",
		db_settings["db_root_user"],
	]
	if db_settings["db_root_password"]:
		root += ["--db-root-password", db_settings["db_root_password"]]
	cli = [sys.executable, "-m", "devbench", "bench", str(path)]
	made = subprocess.run(
		[
			*cli,
			"--site",
			"x.localhost",
			"--site",
			"y.localhost",
			"--redis-url",
			redis_url,
			"--time-zone",
			"Asia/Kolkata",
			"--app",
			f"tests={REPO}",
			*root,
		],
		capture_output=True,
		text=True,
		timeout=120,
		cwd=REPO,
	)
	assert made.returncode == 0, made.stderr
	assert "site x.localhost" in made.stdout and "site y.localhost" in made.stdout
	bench = bench_module.Bench.load(path)
	assert bench.site_names() == ["x.localhost", "y.localhost"]
	with SiteData(bench, "x.localhost") as data:
		assert data.get_single("System Settings", "time_zone") == "Asia/Kolkata"
	assert (path / "sites" / "apps.txt").read_text().split() == ["frappe", "btu", "btu_demo", "tests"]
	bench.app_files.check("tests.engine.tasks.record")

	bad_app = subprocess.run(
		[*cli, "--app", "tests", *root], capture_output=True, text=True, timeout=patient(60), cwd=REPO
	)
	assert bad_app.returncode == 2 and "app 'tests' from" in bad_app.stderr and "--app myapp=" in bad_app.stderr

	bad_zone = subprocess.run(
		[*cli, "--time-zone", "Mars/Olympus", *root], capture_output=True, text=True, timeout=patient(60), cwd=REPO
	)
	assert bad_zone.returncode == 2 and "Mars/Olympus" in bad_zone.stderr

	dropped = subprocess.run([*cli, "--drop", *root[4:]], capture_output=True, text=True, timeout=patient(60), cwd=REPO)
	assert dropped.returncode == 0, dropped.stderr
	assert not path.exists()


def test_cli_reports_a_database_it_cannot_reach(tmp_path):
	result = subprocess.run(
		[sys.executable, "-m", "devbench", "bench", str(tmp_path / "b"), "--db-port", "1"],
		cwd=REPO,
		capture_output=True,
		text=True,
		timeout=60,
	)
	assert result.returncode == 1
	assert "MariaDB at 127.0.0.1:1" in result.stderr and "scripts/services" in result.stderr


def test_controller_indexes_are_read_from_on_doctype_update(tmp_path):
	from devbench.schema import controller_indexes

	controller = tmp_path / "thing.py"
	controller.write_text(
		"import frappe\n"
		"def on_doctype_update():\n"
		"\tfrappe.db.add_index('Thing', ['a', 'b'])\n"
		"\tfrappe.db.add_index('Thing', fields=['c'], index_name='c_idx')\n"
		"\tfrappe.db.add_index('Other', ['x'])\n"
		"def elsewhere():\n"
		"\tfrappe.db.add_index('Thing', ['z'])\n"
	)
	assert controller_indexes(controller, "Thing") == {"a_b_index": ("a", "b"), "c_idx": ("c",)}
	assert controller_indexes(tmp_path / "missing.py", "Thing") == {}


def test_sealed_fields_are_kept_as_btu_keeps_them_and_the_scheduler_reads_them(make_bench):
	"""A Task's arguments, a Schedule's overrides and a Run Request's kwargs live in the sealed table, never in their
	columns (btu.shared.sealed); the scheduler reads them there, and a value SQL wrote into a column first."""
	bench = make_bench()
	with SiteData(bench, "site1.localhost") as data:
		task = data.insert_task(desc_short="t", function_string="btu.demo.hello", arguments={"who": "sealed"})
		schedule = data.insert_schedule(task, run_frequency="Cron Style", cron_string="0 * * * *")
		data.update_schedule(schedule, argument_overrides='{"who": "override"}')
		with data.conn.cursor() as cur:
			cur.execute("SELECT arguments FROM `tabBTU Task` WHERE name=%s", (task,))
			assert cur.fetchone()[0] is None
			cur.execute(f"SELECT fieldname, value FROM `{sealed.TABLE}` WHERE name IN (%s, %s)", (task, schedule))
			assert dict(cur.fetchall()) == {
				"arguments": '{"who": "sealed"}',
				"argument_overrides": '{"who": "override"}',
			}
		assert json.loads(data.get("BTU Task", task)["arguments"]) == {"who": "sealed"}
		db = database.SiteDatabase(bench.site("site1.localhost"), Connections(database.connect))
		row = db.schedule_rows([schedule])[0]
		assert (row["task_arguments"], row["argument_overrides"]) == ('{"who": "sealed"}', '{"who": "override"}')
		with data.conn.cursor() as cur:
			cur.execute("UPDATE `tabBTU Task` SET arguments=%s WHERE name=%s", ('{"who": "by sql"}', task))
		assert db.schedule_rows([schedule])[0]["task_arguments"] == '{"who": "by sql"}'
		data.delete("BTU Task", task)
		with data.conn.cursor() as cur:
			cur.execute(f"SELECT count(*) FROM `{sealed.TABLE}` WHERE doctype='BTU Task' AND name=%s", (task,))
			assert cur.fetchone()[0] == 0
