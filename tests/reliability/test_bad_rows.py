"""Schedule rows written straight into the database (no Frappe validation) with every kind of invalid value.

One scheduler process serves them all (a module-scoped run, to keep the time
low): each bad row must be listed by `btu-scheduler status --json` with a
reason naming the field and the fix, the valid schedules must keep firing,
and each bad row, once UPDATEd to a valid value, must fire.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone

import pytest

from btu.shared import protocol
from devbench import bench as devbench
from devbench.data import SiteData
from tests.conftest import APPS
from tests.engine.helpers import (
	ONE_SECOND,
	SchedulerProcess,
	duplicates,
	gaps,
	slots_by_schedule,
	status_json,
	text,
	wait_until,
)
from tests.reliability.helpers import site_job_ids
from tests.support.keys import KEYS

BAD_SITE = "site1.localhost"  # every bad row, and one good schedule
ZONE_SITE = "site2.localhost"  # System Settings names no real zone
OVERFLOW_SITE = "site3.localhost"  # a row whose next slot lies past year 9999
EVERY_SECOND = {"run_frequency": "Cron Style", "cron_string": ONE_SECOND}
RECORD = "tests.engine.tasks.record"


def utc_now() -> datetime:
	"""Now, naive, in the dev bench's system time zone (UTC)."""
	return datetime.now(timezone.utc).replace(tzinfo=None)


@dataclass
class Case:
	"""A bad row: its columns (over an every-second cron schedule), what its reason must say, and its fix."""

	id: str
	schedule: dict
	words: tuple[str, ...]
	fix: Callable[[BadRowsRun], dict] = lambda run: dict(EVERY_SECOND)
	task: dict | None = None  # the row gets a task of its own, with these columns
	fix_task: dict | None = None  # the fix is to the task, not the schedule
	zero_start_time: bool = False  # start_time made '0000-00-00' by a non-strict SQL session
	touch_modified: bool = True  # False: fixed by a bare UPDATE, as a DBA would, leaving `modified` alone


CASES = [
	Case("cron-hour-25", {"cron_string": "0 25 * * *"}, ("cron_string '0 25 * * *'", "hour 25 is outside 0-23")),
	Case("cron-7-fields", {"cron_string": "0 0 9 * * 1 2025"}, ("cron_string", "has 7 fields", "use 5 (minute hour")),
	Case("cron-empty", {"cron_string": None}, ("cron_string", "is required for Cron Style", "0 9 * * 1-5")),
	Case("cron-unknown-macro", {"cron_string": "@fortnightly"}, ("unknown macro @fortnightly", "@hourly")),
	Case("cron-quartz-L", {"cron_string": "0 0 L * *"}, ("day-of-month 'l' is not supported", "use numbers, names")),
	Case("cron-french-days", {"cron_string": "0 9 * * lun-ven"}, ("day-of-week 'lun'", "sun, mon, tue")),
	Case("cron-step-0", {"cron_string": "*/0 * * * *"}, ("minute step '/0'", "1 or more")),
	Case(
		"cron-february-30",
		{"cron_string": "0 0 30 2 *"},
		("day-of-month 30 never occurs in February", "pick a day that exists"),
	),
	Case(
		"cron-31st-of-30-day-months",
		{"cron_string": "0 0 31 4,6,9,11 *"},
		("day-of-month 31 never occurs in April, June, September, November",),
	),
	Case(
		"unknown-time-zone",
		{"time_zone": "Europe/Londn"},
		("time_zone 'Europe/Londn'", "not a known IANA time zone", "Europe/London"),
		fix=lambda run: {"time_zone": "Europe/London"},
	),
	Case(
		"offset-out-of-range",
		{"time_zone": "+25:00"},
		("time_zone '+25:00'", "-23:59..+23:59"),
		fix=lambda run: {"time_zone": "+05:30"},
	),
	Case(
		"unknown-run-frequency",
		{"run_frequency": "Fortnightly"},
		("run_frequency 'Fortnightly'", "Cron Style, Interval, Once"),
	),
	Case(
		"run-frequency-null",
		{"run_frequency": None},
		("run_frequency ''", "is empty", "set it to one of Hourly, Daily"),
	),
	Case("hourly-minute-75", {"run_frequency": "Hourly", "minute": 75}, ("minute '75'", "outside 0-59")),
	Case("daily-hour-24", {"run_frequency": "Daily", "hour": 24}, ("hour '24'", "outside 0-23")),
	Case(
		"weekly-funday",
		{"run_frequency": "Weekly", "day_of_week": "Funday"},
		("day_of_week 'Funday'", "Monday, Tuesday"),
	),
	Case("monthly-day-32", {"run_frequency": "Monthly", "day_of_month": 32}, ("day_of_month '32'", "outside 1-31")),
	Case(
		"yearly-february-30",
		{"run_frequency": "Yearly", "month": "February", "day_of_month": 30},
		("day_of_month '30'", "February has no day 30", "from 1 to 29"),
	),
	Case("yearly-smarch", {"run_frequency": "Yearly", "month": "Smarch"}, ("month 'Smarch'", "January to December")),
	Case(
		"interval-0",
		{"run_frequency": "Interval", "every": 0, "every_unit": "Seconds"},
		("every '0'", "1 or more"),
		fix=lambda run: {"every": 1},
	),
	Case(
		"interval-negative",
		{"run_frequency": "Interval", "every": -5, "every_unit": "Seconds"},
		("every '-5'", "1 or more"),
		fix=lambda run: {"every": 1},
	),
	Case(
		"interval-weeks",
		{"run_frequency": "Interval", "every": 1, "every_unit": "Weeks"},
		("every_unit 'Weeks'", "Seconds, Minutes, Hours, Days"),
		fix=lambda run: {"every_unit": "Seconds"},
	),
	Case(
		"once-without-run-at",
		{"run_frequency": "Once"},
		("run_at", "is required for a Once schedule", "date and time"),
		fix=lambda run: {"run_at": utc_now() + timedelta(seconds=3)},
	),
	Case(
		"end-before-start",
		{"start_time": utc_now() - timedelta(days=1), "end_time": utc_now() - timedelta(days=2)},
		("end_time", "is before start_time", "move it later or clear it"),
		fix=lambda run: {"end_time": None},
	),
	Case(
		"zero-date-start",
		{},
		("start_time '0000-00-00 00:00:00", "is not a date and time", "YYYY-MM-DD HH:MM:SS"),
		fix=lambda run: {"start_time": None},
		zero_start_time=True,
	),
	Case(
		"catch-up-policy-always",
		{"catch_up_policy": "always"},
		("catch_up_policy 'always'", "fire_once, skip, fire_all"),
		fix=lambda run: {"catch_up_policy": "fire_all"},
	),
	Case(
		"overlap-policy-queue",
		{"overlap_policy": "queue"},
		("overlap_policy 'queue'", "allow, skip"),
		fix=lambda run: {"overlap_policy": "skip"},
	),
	Case(
		"catch-up-max-over-the-cap",
		{"catch_up_policy": "fire_all", "catch_up_max": 604_801},
		("catch_up_max '604801'", "must be from 0 to 10000", "lower it, or use fire_once"),
		fix=lambda run: {"catch_up_max": 100},
	),
	Case("run-limit-negative", {"run_limit": -1}, ("run_limit '-1'", "0 or more"), fix=lambda run: {"run_limit": 0}),
	Case("jitter-negative", {"jitter_secs": -3}, ("jitter_secs '-3'", "0 or more"), fix=lambda run: {"jitter_secs": 0}),
	Case(
		"catch-up-window-negative",
		{"catch_up_window": -1},
		("catch_up_window '-1'", "0 or more"),
		fix=lambda run: {"catch_up_window": 3600},
	),
	Case(
		"missing-task",
		{"task": "BTU-99999"},
		("task 'BTU-99999'", "no BTU Task has that name", "pick an existing task"),
		fix=lambda run: {"task": run.good_task},
	),
	Case(
		"task-arguments-not-json",
		{},
		("arguments is not valid JSON", "line 1, column 2", '{"company": "ACME"'),
		task={"arguments": "{key: 1"},
		fix_task={"arguments": '{"key": "test:runs"}'},
	),
	Case(
		"task-function-empty",
		{},
		("function_string is empty", "dotted path of a function"),
		task={"function_string": ""},
		fix_task={"function_string": RECORD},
	),
	Case(
		"task-unknown-queue",
		{},
		("queue_name 'nosuch'", "short, default, long", "task BTU-"),
		task={"queue_name": "nosuch"},
		fix_task={"queue_name": "default"},
	),
	Case(
		"argument-overrides-array",
		{"argument_overrides": "[1, 2]"},
		("argument_overrides must be a JSON object of keyword arguments, not an array", "wrap it"),
		fix=lambda run: {"argument_overrides": '{"key": "test:runs"}'},
	),
	Case(
		"argument-overrides-not-json",
		{"argument_overrides": "{oops"},
		("argument_overrides is not valid JSON", "line 1, column 2"),
		fix=lambda run: {"argument_overrides": None},
	),
	Case(
		"unknown-queue",
		{"queue_name": "nosuch"},
		(
			"queue_name 'nosuch'",
			"not a queue of this bench",
			"short, default, long",
			"workers key of common_site_config.json",
		),
		fix=lambda run: {"queue_name": "short"},
	),
	Case(
		"fixed-by-bare-update",
		{"cron_string": "0 9 * * 8"},
		("cron_string '0 9 * * 8'", "day-of-week 8 is outside 0-7"),
		touch_modified=False,
	),
]


class BadRowsRun:
	"""The bench, the rows and the scheduler of this module; what each phase found, computed once."""

	def __init__(self, bench, client, log_path):
		self.bench = bench
		self.r = client
		self.log_path = log_path
		self.names: dict[str, str] = {}  # case id -> schedule name
		self.good: dict[str, str] = {}  # site -> its valid every-second schedule
		self.tasks: dict[str, str] = {}  # case id -> the task of its own
		self.good_task = ""
		self.zone_less = ""  # ZONE_SITE's schedule without a zone of its own
		self.overflow = ""
		self.tab_named = ""  # a schedule renamed with a tab in its name
		self.scheduler: SchedulerProcess | None = None
		self.phases: dict[str, tuple] = {}

	def insert(self) -> None:
		with SiteData(self.bench, BAD_SITE) as data:
			self.good_task = data.insert_task(
				function_string=RECORD, arguments={"key": "test:runs"}, desc_short="record"
			)
			self.good[BAD_SITE] = data.insert_schedule(self.good_task, **EVERY_SECOND)
			for case in CASES:
				task = self.good_task
				if case.task is not None:
					task = self.tasks[case.id] = data.insert_task(
						**{
							"function_string": RECORD,
							"arguments": {"key": "test:runs"},
							"desc_short": case.id,
							**case.task,
						}
					)
				columns = {**EVERY_SECOND, **case.schedule}
				task = columns.pop("task", task)
				self.names[case.id] = data.insert_schedule(task, **columns)
				if case.zero_start_time:
					zero_date(data.conn, self.names[case.id])
			self.tab_named = data.insert_schedule(self.good_task, name="TS-tab\tname", **EVERY_SECOND)
		with SiteData(self.bench, ZONE_SITE) as data:
			task = data.insert_task(function_string=RECORD, arguments={"key": "test:runs"})
			self.good[ZONE_SITE] = data.insert_schedule(task, time_zone="UTC", **EVERY_SECOND)
			self.zone_less = data.insert_schedule(task, time_zone=None, **EVERY_SECOND)
			data.set_single("System Settings", "time_zone", "Mars/Base")  # last: SiteData stamps rows in that zone
		with SiteData(self.bench, OVERFLOW_SITE) as data:
			task = data.insert_task(function_string=RECORD, arguments={"key": "test:runs"})
			self.good[OVERFLOW_SITE] = data.insert_schedule(task, **EVERY_SECOND)
			# The largest Int the column holds, in days: its second slot is in year 5,881,630.
			self.overflow = data.insert_schedule(
				task,
				run_frequency="Interval",
				every=2147483647,
				every_unit="Days",
				start_time=utc_now() - timedelta(days=1),
			)

	def wait(self, predicate, timeout: float, what: str):
		try:
			return wait_until(predicate, timeout, what, 0.1)
		except AssertionError as exc:
			raise AssertionError(f"{exc}\n--- scheduler log (tail)\n{self.scheduler.tail(60)}") from None

	def invalid(self, site: str) -> dict[str, str]:
		return {text(k): text(v) for k, v in self.r.hgetall(KEYS.invalid_rows_key(site)).items()}

	def job_ids(self, site: str) -> list[str]:
		return site_job_ids(self.r, self.bench, site, "default", "short")

	def fired(self, site: str = BAD_SITE) -> dict[str, list[int]]:
		"""Schedule -> slots fired, of one site."""
		return slots_by_schedule(self.job_ids(site))

	def once(self, phase: str, compute):
		"""`compute()` the first time; later calls get its result, or its failure again without waiting again."""
		if phase not in self.phases:
			try:
				self.phases[phase] = (compute(), None)
			except Exception as exc:
				self.phases[phase] = (None, exc)
		result, failure = self.phases[phase]
		if failure is not None:
			raise AssertionError(f"the {phase} phase failed earlier: {failure}")
		return result

	def reported(self) -> dict:
		"""`btu-scheduler status --json` once every bad row of BAD_SITE is listed and the good one fired."""

		def compute():
			self.wait(lambda: len(self.invalid(BAD_SITE)) >= len(CASES), 20, "every bad row is listed as invalid")
			self.wait(lambda: len(self.fired().get(self.good[BAD_SITE], [])) >= 2, 10, "the valid schedule fires")
			return status_json(self.bench.path)

		return self.once("report", compute)

	def fix(self) -> set[str]:
		"""UPDATE every bad row (or its task) to a valid value, once; the schedules that fired since."""
		self.reported()
		return self.once("fix", self._fix)

	def _fix(self) -> set[str]:
		with SiteData(self.bench, BAD_SITE) as data:
			for case in CASES:
				name = self.names[case.id]
				columns = case.fix(self)
				if case.fix_task is not None:
					data.update("BTU Task", self.tasks[case.id], **case.fix_task)
				elif case.touch_modified:
					data.update_schedule(name, **columns)
				else:
					with data.conn.cursor() as cur:
						assignments = ", ".join(f"`{column}`=%s" for column in columns)
						cur.execute(
							f"UPDATE `tabBTU Task Schedule` SET {assignments} WHERE name=%s", (*columns.values(), name)
						)
		expected = {self.names[case.id] for case in CASES}
		self.wait(lambda: expected <= set(self.fired()), 20, "every fixed row fires")
		return set(self.fired())


def zero_date(conn, name: str) -> None:
	"""start_time '0000-00-00 00:00:00': what a non-strict session (or an old MySQL dump) leaves in a Datetime."""
	with conn.cursor() as cur:
		cur.execute("SET SESSION sql_mode = ''")
		cur.execute("UPDATE `tabBTU Task Schedule` SET start_time = '0000-00-00 00:00:00' WHERE name=%s", (name,))
		cur.execute("SET SESSION sql_mode = DEFAULT")


@pytest.fixture(scope="module")
def run(redis_server, db_settings, tmp_path_factory):
	redis_server.client().flushall()
	path = tmp_path_factory.mktemp("bad-rows") / "bench"
	bench = devbench.create_dev_bench(
		path, (BAD_SITE, ZONE_SITE, OVERFLOW_SITE), redis_url=redis_server.url,
		bench_id=f"btutest{uuid.uuid4().hex[:8]}", apps=APPS, **db_settings,
	)  # fmt: skip
	client = redis_server.client()
	state = BadRowsRun(bench, client, path.parent / "scheduler.log")
	try:
		state.insert()
		state.scheduler = SchedulerProcess(bench.path, state.log_path, flags=("--full-refresh-interval-secs", "1"))
		yield state
	finally:
		if state.scheduler is not None:
			state.scheduler.stop()
		client.close()
		devbench.drop_dev_bench(
			path, db_root_user=db_settings["db_root_user"], db_root_password=db_settings["db_root_password"]
		)


@pytest.mark.parametrize("case", CASES, ids=lambda case: case.id)
def test_bad_row_is_listed_with_its_field_and_fix(run, case):
	name = run.names[case.id]
	invalid = run.reported()["sites"][BAD_SITE]["invalid"]
	assert name in invalid, f"{case.id}: {name} is not listed by status --json; listed: {sorted(invalid)}"
	for word in case.words:
		assert word in invalid[name], f"{case.id}: {word!r} not in the reason {invalid[name]!r}"
	assert f" invalid_schedule site={BAD_SITE} schedule={name} " in run.scheduler.log()
	assert name not in run.fired(), "a bad row fired"


def test_a_name_with_a_tab_is_an_invalid_row(run):
	run.reported()
	run.wait(lambda: run.tab_named in run.invalid(BAD_SITE), 10, "the tab-named schedule is listed")
	reason = run.invalid(BAD_SITE)[run.tab_named]
	assert "control characters" in reason and "rename the schedule" in reason
	assert run.tab_named not in run.fired()


def test_unknown_system_time_zone_holds_only_the_schedules_that_rely_on_it(run):
	run.reported()
	run.wait(lambda: run.zone_less in run.invalid(ZONE_SITE), 10, "the zone-less schedule is listed")
	assert "Mars/Base" in run.invalid(ZONE_SITE)[run.zone_less]
	run.wait(
		lambda: len(run.fired(ZONE_SITE).get(run.good[ZONE_SITE], [])) >= 2, 10, "the schedule with its own zone fires"
	)


def test_unknown_system_time_zone_is_named_as_the_sites(run):
	run.reported()
	run.wait(lambda: run.zone_less in run.invalid(ZONE_SITE), 10, "the zone-less schedule is listed")
	assert "System Settings" in run.invalid(ZONE_SITE)[run.zone_less]


def test_slot_past_year_9999_is_one_invalid_row_not_a_lost_site(run):
	run.reported()
	run.wait(lambda: run.good[OVERFLOW_SITE] in run.fired(OVERFLOW_SITE), 3, "the valid schedule of the site fires")
	assert "every" in run.invalid(OVERFLOW_SITE).get(run.overflow, "")


@pytest.mark.parametrize("case", CASES, ids=lambda case: case.id)
def test_fixed_row_fires(run, case):
	fired = run.fix()
	name = run.names[case.id]
	assert name in fired, f"{case.id}: {name} did not fire after its fix"
	assert name not in run.invalid(BAD_SITE), "still listed as invalid after the fix"


def test_valid_schedules_kept_firing_throughout(run):
	run.fix()
	assert run.scheduler.alive()
	now_ms = time.time() * 1000
	for site in (BAD_SITE, ZONE_SITE):
		slots = run.fired(site)[run.good[site]]
		assert gaps(slots) == [], f"{site}: the valid schedule missed slots while bad rows were read"
		assert max(slots) > now_ms - 3000, f"{site}: the valid schedule stopped firing"
	for site in (BAD_SITE, ZONE_SITE):
		assert duplicates(run.job_ids(site)) == []
