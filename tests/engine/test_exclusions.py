"""Exclusions with a real Redis and MariaDB: a skipped slot never fires, even once prepared; a calendar's dates hold;
the scheduler's SQL reads calendar dates and copes with a site without ERPNext/HRMS's Holiday table."""

from __future__ import annotations

import logging
import time
from datetime import date, datetime, timedelta, timezone

import pytest

from btu.scheduler_daemon.reads.connections import Connections
from btu.scheduler_daemon.reads.database import SiteDatabase, connect
from btu.scheduler_daemon.store.state import Prepared
from btu.shared import protocol
from btu.shared.instants import slot_text
from tests.engine.helpers import ONE_SECOND, queue_ids, queue_key, slots_by_schedule, wait_until
from tests.engine.test_prepare_release import leader, prepare_due, release
from tests.support.keys import KEYS


@pytest.fixture
def site(engine_bench):
	bench, data = engine_bench()
	task = data.insert_task(
		function_string="tests.engine.tasks.record", arguments={"key": "test:runs"}, desc_short="record"
	)
	return bench, data, task


def prepared_slots(r, name: str) -> list[int]:
	members = [Prepared.parse(m) for m in r.zrange(KEYS.prepared, 0, -1)]
	return sorted(m.slot_ms for m in members if m.schedule == name)


def skip(data, name: str, slot_ms: int) -> None:
	"""What saving a skip does to the rows: a child row, and the schedule's modified stamp."""
	with data.conn.cursor() as cur:
		cur.execute(
			"INSERT INTO `tabBTU Skipped Slot` (name, parent, parenttype, parentfield, idx, slot_utc) "
			"VALUES (%s, %s, 'BTU Task Schedule', 'skipped_slots', 1, %s)",
			(f"skip-{name}-{slot_ms}", name, slot_text(datetime.fromtimestamp(slot_ms / 1000, timezone.utc))),
		)
	data.update_schedule(name, jitter_secs=0)  # bumps modified, as a save does


def test_a_prepared_skipped_slot_is_withdrawn_and_never_fires(site, r, caplog):
	bench, data, task = site
	name = data.insert_schedule(task, run_frequency="Cron Style", cron_string=ONE_SECOND, time_zone="UTC")
	scheduler = leader(bench)
	prepare_due(scheduler)
	slots = prepared_slots(r, name)
	assert len(slots) >= 2, "two seconds ahead holds two slots of an every-second schedule"
	# The first is prepared already; the other one is not yet: the planner passes it later.
	prepared, ahead = slots[0], slots[-1] + 2000

	skip(data, name, prepared)
	skip(data, name, ahead)
	with caplog.at_level(logging.INFO, logger="btu.scheduler"):
		scheduler.reconciler.sync(data.site.name, [name])  # what the RPC after the save runs
	assert prepared not in prepared_slots(r, name), "the spec change withdrew the prepared fire"
	# The run the schedule was waiting for is passed by the edit itself (docs/POLICIES.md, "Skip the next run(s)"):
	# one schedule_changed line naming the run that fires next, a run not skipped after it.
	[changed] = [record.btu_fields for record in caplog.records if record.getMessage() == "schedule_changed"]
	following = datetime.fromisoformat(changed["slot"].replace("Z", "+00:00")).timestamp() * 1000
	assert changed["schedule"] == name and following > prepared and following != ahead, (changed, prepared, ahead)
	assert not [record for record in caplog.records if record.getMessage() == "skipped_by_request"], (
		"not a skip the plan passed"
	)
	caplog.clear()

	with caplog.at_level(logging.INFO, logger="btu.scheduler"):
		while time.time() * 1000 < ahead + 1500:
			prepare_due(scheduler)
			release(scheduler)
			time.sleep(0.05)
	fired = slots_by_schedule(queue_ids(r, queue_key(bench))).get(name, [])
	assert prepared not in fired and ahead not in fired
	assert [s for s in fired if s > ahead], "the slots after the skipped ones fire"
	passed = [record.btu_fields for record in caplog.records if record.getMessage() == "skipped_by_request"]
	slot = slot_text(datetime.fromtimestamp(ahead / 1000, timezone.utc))
	assert passed == [{"site": data.site.name, "schedule": name, "slot": slot}], (
		"one line when the planner passes a skipped slot"
	)
	counted = scheduler.metrics.registry.get_sample_value(
		"btu_fires_skipped_total", {"site": data.site.name, "reason": "requested"}
	)
	assert counted == 1, "counted once, as btu_fires_skipped_total{reason=requested}"


def test_calendar_exclusion_holds_and_an_edit_of_the_calendar_takes_effect(site, r, processes):
	bench, data, task = site
	today = datetime.now(timezone.utc).date()
	calendar = data.insert(
		"BTU Calendar",
		calendar_name="Closed",
		dates=[{"date": today}, {"date": today + timedelta(days=1)}, {"date": today}],
	)
	closed = data.insert_schedule(
		task, run_frequency="Cron Style", cron_string=ONE_SECOND, time_zone="UTC", calendar=calendar
	)
	moved = data.insert_schedule(
		task,
		run_frequency="Cron Style",
		cron_string=ONE_SECOND,
		time_zone="UTC",
		calendar=calendar,
		calendar_policy="Move to next working day",
	)
	open_ = data.insert_schedule(task, run_frequency="Cron Style", cron_string=ONE_SECOND, time_zone="UTC")
	processes.scheduler(bench.path, "--full-refresh-interval-secs", "300")
	wait_until(
		lambda: len(slots_by_schedule(queue_ids(r, queue_key(bench))).get(open_, [])) >= 3,
		30,
		"the open schedule fires",
	)
	fired = slots_by_schedule(queue_ids(r, queue_key(bench)))
	assert closed not in fired and moved not in fired, "no fire on an excluded day, under either policy"

	# The calendar loses today's date: saving it bumps its stamp and announces its schedules (btu_calendar.py).
	with data.conn.cursor() as cur:
		cur.execute("DELETE FROM `tabBTU Calendar Date` WHERE parent=%s", (calendar,))
	data.update("BTU Calendar", calendar, description="open again")
	for name in (closed, moved):
		assert protocol.call(r, KEYS, protocol.CREATE_TASK_SCHEDULE, name, site=data.site.name).ok
	wait_until(
		lambda: closed in slots_by_schedule(queue_ids(r, queue_key(bench))),
		10,
		"the schedule fires once the calendar is edited",
	)


def test_sql_reads_calendar_dates_and_holidays_when_the_table_exists(site):
	bench, data, task = site
	calendar = data.insert(
		"BTU Calendar",
		calendar_name="Plant",
		holiday_list="HL-2026",
		dates=[
			{"date": date(2026, 12, 25)},
			{"date": date(2026, 12, 25)},
			{"date": date(2019, 1, 1)},
			{"date": date(2026, 12, 31)},
		],
	)
	db = SiteDatabase(bench.site(data.site.name), Connections(connect))
	low, high = date(2025, 1, 1), date(2031, 12, 31)
	assert not db.has_table("tabHoliday")
	assert db.calendar_dates([calendar, "nope"], low, high) == {calendar: {date(2026, 12, 25), date(2026, 12, 31)}}
	with data.conn.cursor() as cur:
		cur.execute("CREATE TABLE `tabHoliday` (name varchar(140) primary key, parent varchar(140), holiday_date date)")
		cur.execute(
			"INSERT INTO `tabHoliday` VALUES "
			"('h1', 'HL-2026', '2026-05-01'), ('h2', 'HL-other', '2026-06-01'), ('h3', 'HL-2026', '2040-01-01')"
		)
	try:
		assert db.calendar_dates([calendar], low, high) == {
			calendar: {date(2026, 5, 1), date(2026, 12, 25), date(2026, 12, 31)}
		}
	finally:
		with data.conn.cursor() as cur:
			cur.execute("DROP TABLE `tabHoliday`")
	assert db.calendar_dates([], low, high) == {}


def test_hostile_rows_make_an_invalid_schedule_not_a_crash(site, r):
	bench, data, task = site
	garbage = data.insert_schedule(task, run_frequency="Cron Style", cron_string=ONE_SECOND, time_zone="UTC")
	with data.conn.cursor() as cur:
		cur.execute(
			"INSERT INTO `tabBTU Skipped Slot` (name, parent, parenttype, parentfield, idx, slot_utc) "
			"VALUES ('g1', %s, 'BTU Task Schedule', 'skipped_slots', 1, 'not a time')",
			(garbage,),
		)
	many = data.insert_schedule(task, run_frequency="Cron Style", cron_string=ONE_SECOND, time_zone="UTC")
	rows = [
		(f"m{i}", many, (datetime(2030, 1, 1, tzinfo=timezone.utc) + timedelta(seconds=i)).isoformat())
		for i in range(10_000)
	]
	with data.conn.cursor() as cur:
		cur.executemany(
			"INSERT INTO `tabBTU Skipped Slot` (name, parent, parenttype, parentfield, idx, slot_utc) "
			"VALUES (%s, %s, 'BTU Task Schedule', 'skipped_slots', 1, %s)",
			rows,
		)
	fine = data.insert_schedule(task, run_frequency="Cron Style", cron_string=ONE_SECOND, time_zone="UTC")
	scheduler = leader(bench)
	names = scheduler.state.names(data.site.name)
	assert fine in names and garbage not in names and many not in names
	invalid = {k.decode(): v.decode() for k, v in r.hgetall(KEYS.invalid_rows_key(data.site.name)).items()}
	assert "skipped_slots" in invalid[garbage] and "1000" in invalid[many]
