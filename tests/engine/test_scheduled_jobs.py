"""Frappe's Scheduled Job Types fired by BTU's scheduler (BTU Configuration.fire_frappe_jobs).

The scheduler reads `tabScheduled Job Type` by SQL and fires each row BTU takes as a cron state
"frappe-job:<name>" in the site's zone; the job is Frappe's execute_job around BTU's task runner,
on Frappe's queue for the frequency. Off unless switched on; nothing while Frappe's scheduler is
disabled for the site; rows Frappe keeps (stopped, BTU's watchdog, crons BTU would read otherwise)
never become states; a hostile row is invalid, not a crash.
"""

from __future__ import annotations

import json
import time
from datetime import datetime, timedelta, timezone

import pytest
from rq.job import Job

from btu.scheduler_daemon.leading.engine import Scheduler
from btu.scheduler_daemon.operations.config import Config
from btu.scheduler_daemon.reads import sources
from btu.scheduler_daemon.store.jobs import parse_job_id
from btu.scheduler_daemon.store.outcomes import FireOutcome
from btu.shared import scheduled_jobs as fj
from btu.shared.job_contract import TASK_RUNNER
from btu.shared.run_kind import RunKey, RunKind
from tests.engine.helpers import definition, queue_ids, queue_key, recent_fires, state_names
from tests.engine.test_prepare_release import prepare_due, release

pytestmark = pytest.mark.versions

UTC = timezone.utc
TABLE = "tabScheduled Job Type"


def job_key(name: str) -> str:
	"""The key text of the job type's run, its state's name."""
	return RunKey(RunKind.FRAPPE_JOB, name).format()


def insert_job_type(
	data,
	name: str,
	*,
	frequency: str = "Cron",
	cron_format: str | None = None,
	method: str | None = None,
	last_execution=None,
	stopped: int = 0,
) -> str:  # noqa: E501
	"""A Scheduled Job Type row as Frappe's sync_jobs writes it (naive datetimes in the site's zone, UTC here),
	created a month ago and last run now unless `last_execution` says otherwise."""
	now = datetime.now(UTC).replace(tzinfo=None)
	last_execution = now if last_execution is None else last_execution
	with data.conn.cursor() as cur:
		cur.execute(
			f"INSERT INTO `{TABLE}` "
			"(name, creation, modified, method, frequency, cron_format, stopped, last_execution, create_log) "
			"VALUES (%s, %s, %s, %s, %s, %s, %s, %s, 1)",
			(
				name,
				now - timedelta(days=30),
				now,
				method or f"app.tasks.{name}",
				frequency,
				cron_format,
				stopped,
				last_execution or None,
			),
		)
	return job_key(name)


def update_job_type(data, name: str, **fields) -> None:
	with data.conn.cursor() as cur:
		cur.execute(
			f"UPDATE `{TABLE}` SET {', '.join(f'`{k}`=%s' for k in fields)} WHERE name=%s", (*fields.values(), name)
		)


def clear_of_boundary(period_secs: int, before: float = 3.0, after: float = 11.0) -> None:
	"""Wait until the clock (UTC) is not within `before` s ahead of a cron period's boundary (the 2 s prepare window)
	nor `after` s past one (the 10 s misfire grace, when that slot fires on time): a test that expects only a
	catch-up fire must not also see a slot that is on time."""
	into = time.time() % period_secs
	if into < after:
		time.sleep(after - into)
	elif period_secs - into < before:
		time.sleep(period_secs - into + after)


def frappe_leader(bench) -> Scheduler:
	# lease_ttl_secs: as test_prepare_release.leader, held without renewals.
	scheduler = Scheduler(
		Config(
			bench=str(bench.path),
			executor="frappe",
			prepare_ahead_secs=2.0,
			misfire_grace_secs=10.0,
			lease_ttl_secs=60.0,
		),
		bench.path,
	)
	assert scheduler.lease.acquire()
	scheduler.reconciler.full()
	return scheduler


@pytest.fixture
def site(engine_bench):
	"""A dev bench site in UTC with Frappe's scheduler enabled and BTU firing its Scheduled Job Types."""
	bench, data = engine_bench()
	data.set_single("System Settings", "time_zone", "UTC")
	data.set_single("System Settings", "enable_scheduler", 1)
	data.set_single("BTU Configuration", "fire_frappe_jobs", 1)
	return bench, data


def test_job_types_btu_takes_become_cron_states_and_the_rest_do_not(site, r):
	bench, data = site
	clear_of_boundary(60)
	taken = {
		insert_job_type(data, "every_minute", cron_format="* * * * *"),
		insert_job_type(data, "daily_long", frequency="Daily Long"),
		insert_job_type(data, "all", frequency="All"),
	}
	kept = {
		insert_job_type(data, "stopped", cron_format="* * * * *", stopped=1),
		insert_job_type(data, "watchdog", cron_format="* * * * *", method="btu.btu_core.alerts.watchdog.check"),
		insert_job_type(data, "seconds_last", cron_format="0 */2 * * * *"),
		insert_job_type(data, "bad_cron", cron_format="61 * * * *"),
		insert_job_type(data, "no_cron", frequency="Cron", cron_format=""),
	}
	scheduler = frappe_leader(bench)
	names = state_names(r, data.site.name)
	assert taken <= names and not kept & names
	# Each at its cron's next moment in the site's zone: the next minute, the next midnight, the next 4th minute.
	now = datetime.now(UTC)
	cursors = {name: int(r.hget(f"btu:site:{data.site.name}:schedule:{name}", "cursor") or 0) for name in taken}
	next_minute = (now.replace(second=0, microsecond=0) + timedelta(minutes=1)).timestamp() * 1000
	assert cursors[job_key("every_minute")] == next_minute
	assert (
		cursors[job_key("daily_long")]
		== (now.replace(hour=0, minute=0, second=0, microsecond=0) + timedelta(days=1)).timestamp() * 1000
	)
	assert datetime.fromtimestamp(cursors[job_key("all")] / 1000, UTC).minute % 4 == 0
	# Fired at the slot, except a Long frequency's: up to 600 s after it, as Frappe delays those.
	fire_at = {name: int(r.hget(f"btu:site:{data.site.name}:schedule:{name}", "fire_at")) for name in taken}
	assert fire_at[job_key("every_minute")] == cursors[job_key("every_minute")]
	assert 0 <= fire_at[job_key("daily_long")] - cursors[job_key("daily_long")] <= fj.LONG_JITTER_SECS * 1000
	template = json.loads(definition(r, data.site.name, job_key("daily_long"))[1])
	assert template["queue"].endswith(":long") and template["executor"] == "frappe"
	# Never run (no last_execution): Frappe counts from its creation, so one catch-up run is due now, as Frappe makes.
	never = insert_job_type(data, "never_run", cron_format="0 3 * * *", last_execution="")
	scheduler.reconciler.sync(data.site.name, [never])
	assert int(r.hget(f"btu:site:{data.site.name}:schedule:{never}", "cursor")) < time.time() * 1000


def test_a_missed_slot_fires_once_at_once_as_frappes_job_on_its_queue(site, r):
	"""last_execution 10 minutes ago, every 5 minutes: one catch-up fire now (Frappe's one late run)."""
	bench, data = site
	site_name = data.site.name
	clear_of_boundary(300)
	ten_ago = datetime.now(UTC).replace(tzinfo=None) - timedelta(minutes=10)
	state = insert_job_type(data, "five", cron_format="*/5 * * * *", last_execution=ten_ago)
	scheduler = frappe_leader(bench)
	prepare_due(scheduler)
	assert release(scheduler)
	fires = [f for f in recent_fires(r, site_name) if f["schedule"] == state]
	assert [f["outcome"] for f in fires] == [FireOutcome.ENQUEUED]
	[job_id] = queue_ids(r, queue_key(bench))
	assert parse_job_id(job_id)[:2] == (site_name, state)
	job = Job.fetch(job_id, connection=r)
	assert job.func_name == "frappe.utils.background_jobs.execute_job"
	assert job.kwargs["method"] == TASK_RUNNER and job.kwargs["site"] == site_name
	assert job.kwargs["kwargs"]["schedule"] == state and job.kwargs["kwargs"]["task"] == state
	slot = datetime.fromisoformat(job.kwargs["kwargs"]["slot"].replace("Z", "+00:00"))
	assert slot.minute % 5 == 0 and slot > ten_ago.replace(tzinfo=UTC) and slot <= datetime.now(UTC)
	assert job.timeout == 300  # the default queue's
	# Nothing more until its next slot.
	scheduler.reconciler.full()
	prepare_due(scheduler)
	assert release(scheduler) and len(queue_ids(r, queue_key(bench))) == 1


@pytest.mark.parametrize("switch", ["fire_frappe_jobs off", "enable_scheduler off", "disable_scheduler", "rq executor"])
def test_every_way_of_turning_it_off_takes_the_states_out(site, r, switch):
	bench, data = site
	site_name = data.site.name
	state = insert_job_type(data, "every_minute", cron_format="* * * * *")
	scheduler = frappe_leader(bench)
	assert state in state_names(r, site_name)
	if switch == "fire_frappe_jobs off":
		data.set_single("BTU Configuration", "fire_frappe_jobs", 0)
	elif switch == "enable_scheduler off":
		data.set_single("System Settings", "enable_scheduler", 0)
	elif switch == "disable_scheduler":
		path = bench.path / "sites" / site_name / "site_config.json"
		path.write_text(json.dumps({**json.loads(path.read_text()), "disable_scheduler": 1}))
	else:
		# A scheduler of the rq executor: its plain rq workers could not run a Scheduled Job Type.
		scheduler = Scheduler(Config(bench=str(bench.path), executor="rq", prepare_ahead_secs=2.0), bench.path)
	scheduler.reconciler.full()
	assert state not in state_names(r, site_name)


def test_changes_to_a_row_are_seen_by_a_full_reconcile_and_by_the_rpc_path(site, r):
	bench, data = site
	site_name = data.site.name
	state = insert_job_type(data, "edited", cron_format="0 3 * * *")
	scheduler = frappe_leader(bench)
	before = definition(r, site_name, state)[0]
	# Changed by SQL without touching modified (as a DBA's UPDATE would): the checksum still moves.
	update_job_type(data, "edited", cron_format="0 4 * * *")
	scheduler.reconciler.full()
	assert definition(r, site_name, state)[0] != before and "0 4 * * *" in definition(r, site_name, state)[0]
	# Stopped in the Desk: the after-commit RPC names the state; it leaves at once.
	update_job_type(data, "edited", stopped=1)
	scheduler.reconciler.sync(site_name, [state])
	assert state not in state_names(r, site_name)
	reconciler = scheduler.reconciler
	database = reconciler.database(reconciler.snapshot().bench.site(site_name))
	assert sources.existing(database, [state, job_key("nope")]) == {state}


def test_a_schedule_named_like_a_job_types_state_never_fires(site, r):
	bench, data = site
	task = data.insert_task(function_string="tests.engine.tasks.record", desc_short="record")
	data.insert_schedule(task, name="frappe-job:evil", run_frequency="Cron Style", cron_string="* * * * *")
	honest = data.insert_schedule(task, run_frequency="Cron Style", cron_string="* * * * *")
	frappe_leader(bench)
	names = state_names(r, data.site.name)
	assert honest in names and "frappe-job:evil" not in names


def test_hostile_rows_are_invalid_or_left_out_never_fatal(site, r):
	bench, data = site
	good = insert_job_type(data, "good", cron_format="* * * * *")
	insert_job_type(data, "tab\tname", cron_format="* * * * *")
	insert_job_type(data, "future_last", cron_format="* * * * *", last_execution=datetime(2999, 1, 1))
	insert_job_type(data, "feb30", cron_format="0 0 30 2 *")
	frappe_leader(bench)
	names = state_names(r, data.site.name)
	assert good in names and job_key("tab\tname") not in names
	invalid = {k.decode(): v.decode() for k, v in r.hgetall(f"btu:site:{data.site.name}:invalid").items()}
	assert "control characters" in invalid.get(job_key("tab\tname"), ""), invalid
	# A last_execution in the future (a clock set wrong) does not hold the job back past now.
	cursor = int(r.hget(f"btu:site:{data.site.name}:schedule:{job_key('future_last')}", "cursor"))
	assert cursor <= (time.time() + 61) * 1000
