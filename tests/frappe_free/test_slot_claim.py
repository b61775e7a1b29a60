"""The slot lock on a real MariaDB: one delivery of a (schedule, slot) runs, every other finds its Log and is
refused."""

from __future__ import annotations

import threading
import uuid

import pymysql
import pytest

from btu.btu_core.runs.slot_claim import (
	LOG_FOR_SLOT_SQL,
	SlotLock,
	SlotLockTimeout,
	attempt_slot,
	lock_key,
	postgres_key,
)

pytestmark = pytest.mark.versions

LOG_DDL = (
	"create table `tabBTU Task Log` (name varchar(140) primary key, schedule varchar(140), slot_utc varchar(140), "
	"status varchar(140), attempt int(11) not null default 0, creation datetime(6) default current_timestamp(6))"
)


@pytest.fixture
def database(db_settings):
	name = f"btu_claim_{uuid.uuid4().hex[:10]}"
	root = connect(db_settings)
	root.cursor().execute(f"create database `{name}`")
	root.select_db(name)
	root.cursor().execute(LOG_DDL)
	yield name
	root.cursor().execute(f"drop database `{name}`")
	root.close()


def connect(db_settings, database: str | None = None) -> pymysql.Connection:
	return pymysql.connect(
		host=db_settings["db_host"], port=db_settings["db_port"], user=db_settings["db_root_user"],
		password=db_settings["db_root_password"], database=database, autocommit=True,
	)  # fmt: skip


def sql_of(conn):
	def sql(query, params):
		with conn.cursor() as cur:
			cur.execute(query, params)
			return cur.fetchall()

	return sql


def deliver(db_settings, database: str, schedule: str, slot: str, outcomes: list, start: threading.Barrier) -> None:
	"""What the task runner does with one delivery: lock, look for the slot's Log, insert it or refuse."""
	conn = connect(db_settings, database)
	sql = sql_of(conn)
	start.wait()
	with SlotLock(sql, "mariadb", lock_key(database, schedule, slot)):
		if sql(LOG_FOR_SLOT_SQL, (schedule, slot, 1)):
			outcomes.append("refused")
		else:
			sql(
				"insert into `tabBTU Task Log` (name, schedule, slot_utc, status) values (%s, %s, %s, 'Started')",
				(uuid.uuid4().hex, schedule, slot),
			)
			outcomes.append("ran")
	conn.close()


def test_twenty_concurrent_deliveries_of_one_slot_run_once(db_settings, database):
	outcomes: list[str] = []
	start = threading.Barrier(20)
	threads = [
		threading.Thread(target=deliver, args=(db_settings, database, "TS-1", "2026-11-24T00:00:01Z", outcomes, start))
		for _ in range(20)
	]
	for thread in threads:
		thread.start()
	for thread in threads:
		thread.join(60)
	assert sorted(outcomes) == ["ran"] + ["refused"] * 19
	conn = connect(db_settings, database)
	assert sql_of(conn)("select count(*) from `tabBTU Task Log`", ())[0][0] == 1
	conn.close()


def test_a_held_lock_times_out_with_the_key_named(db_settings, database):
	key = lock_key(database, "TS-1", "2026-11-24T00:00:01Z")
	holder, waiter = connect(db_settings, database), connect(db_settings, database)
	with SlotLock(sql_of(holder), "mariadb", key):
		with pytest.raises(SlotLockTimeout, match=key):
			with SlotLock(sql_of(waiter), "mariadb", key, wait_secs=0.2):
				pass
	with SlotLock(sql_of(waiter), "mariadb", key, wait_secs=0.2):
		pass  # released by the holder's exit
	holder.close()
	waiter.close()


def test_other_slots_schedules_and_databases_do_not_wait(db_settings, database):
	holder, other = connect(db_settings, database), connect(db_settings, database)
	with SlotLock(sql_of(holder), "mariadb", lock_key(database, "TS-1", "2026-11-24T00:00:01Z")):
		for key in (
			lock_key(database, "TS-1", "2026-11-24T00:00:02Z"),
			lock_key(database, "TS-2", "2026-11-24T00:00:01Z"),
			lock_key(database + "x", "TS-1", "2026-11-24T00:00:01Z"),
		):
			with SlotLock(sql_of(other), "mariadb", key, wait_secs=0.2):
				pass
	holder.close()
	other.close()


def test_keys_fit_mariadb_and_postgres():
	key = lock_key("d" * 64, "S" * 140, "2026-11-24T00:00:01.250Z")
	assert len(key) <= 64 and key.isascii()
	assert -(2**63) <= postgres_key(key) < 2**63
	assert lock_key("a", "b\nc", "d") != lock_key("a", "b", "c\nd")


def test_an_unknown_database_type_is_refused():
	with pytest.raises(ValueError, match="sqlite"):
		SlotLock(lambda q, p: [], "sqlite", "k")


def test_each_attempt_of_a_slot_is_its_own_run(db_settings, database):
	"""A retry (attempt 2) of a slot that has its first Log runs once; a Log from before retries (attempt 0) is the
	first."""
	conn = connect(db_settings, database)
	sql = sql_of(conn)
	slot = "2026-11-24T00:00:01Z"
	sql(
		"insert into `tabBTU Task Log` (name, schedule, slot_utc, status, attempt) "
		"values ('old', 'TS-1', %s, 'Failed', 0)",
		(slot,),
	)
	assert sql(LOG_FOR_SLOT_SQL, ("TS-1", slot, 1))[0][0] == "old"
	assert not sql(LOG_FOR_SLOT_SQL, ("TS-1", slot, 2))
	sql(
		"insert into `tabBTU Task Log` (name, schedule, slot_utc, status, attempt) "
		"values ('retry', 'TS-1', %s, 'Started', 2)",
		(slot,),
	)
	assert sql(LOG_FOR_SLOT_SQL, ("TS-1", slot, 2))[0][0] == "retry"
	assert not sql(LOG_FOR_SLOT_SQL, ("TS-1", slot, 3))
	# The first attempt keeps the key earlier versions took; later attempts have their own.
	assert attempt_slot(slot, 1) == slot and attempt_slot(slot, 0) == slot
	assert len({lock_key(database, "TS-1", attempt_slot(slot, n)) for n in (1, 2, 3)}) == 3
	conn.close()
