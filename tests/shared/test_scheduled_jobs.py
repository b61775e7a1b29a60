"""Which Scheduled Job Types BTU takes, and the moments it fires them at: Frappe's frequencies as cron."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

import pytest

from btu.shared import scheduled_jobs as fj
from btu.shared.run_kind import RunKey, RunKind
from btu.shared.schedule import ScheduleSpec

pytestmark = pytest.mark.versions

UTC = timezone.utc


@pytest.mark.parametrize(
	("frequency", "cron"),
	[
		("Hourly", "0 * * * *"), ("Hourly Long", "0 * * * *"), ("Hourly Maintenance", "0 * * * *"),
		("Daily", "0 0 * * *"), ("Daily Long", "0 0 * * *"), ("Daily Maintenance", "0 0 * * *"),
		("Weekly", "0 0 * * 0"), ("Weekly Long", "0 0 * * 0"), ("Monthly", "0 0 1 * *"), ("Monthly Long", "0 0 1 * *"),
		("Yearly", "0 0 1 1 *"), ("Annual", "0 0 1 1 *"),
	],
)  # fmt: skip
def test_every_frequency_is_frappes_cron(frequency, cron):
	assert fj.cron_of(frequency, None, None) == cron
	assert fj.queue_of(frequency) == ("long" if ("Long" in frequency or "Maintenance" in frequency) else "default")


@pytest.mark.parametrize(
	("interval", "cron"),
	[
		(None, "*/4 * * * *"),
		(240, "*/4 * * * *"),
		(60, "*/1 * * * *"),
		("120", "*/2 * * * *"),
		(30, "*/1 * * * *"),
		("junk", "*/4 * * * *"),
	],
)
def test_all_follows_the_sites_scheduler_interval(interval, cron):
	assert fj.cron_of("All", "", interval) == cron


def test_a_cron_format_wins_over_the_frequency_as_frappe_reads_it():
	assert fj.cron_of("Cron", " */2  *  * * * ", None) == "*/2 * * * *"
	assert fj.cron_of("Daily", "30 1 * * *", None) == "30 1 * * *"
	with pytest.raises(ValueError, match="frequency 'Cron' has no cron_format"):
		fj.cron_of("Cron", "", None)


@pytest.mark.parametrize(
	("method", "frequency", "cron", "taken"),
	[
		("app.tasks.every_minute", "Cron", "* * * * *", True),
		("app.tasks.daily", "Daily", None, True),
		("app.tasks.all", "All", None, True),
		("app.tasks.x", "Cron", "@hourly", True),
		# Frappe keeps: its own watchdog of BTU, croniter's six-field (seconds last) form, what BTU cannot read.
		("btu.btu_core.alerts.watchdog.check", "Cron", "* * * * *", False),
		# Its path before alerts was a package: its row until migrate.
		("btu.btu_core.alerts.check", "Cron", "* * * * *", False),
		("app.tasks.x", "Cron", "0 */2 * * * *", False),
		("app.tasks.x", "Cron", "61 * * * *", False),
		("app.tasks.x", "Cron", "", False),
		("app.tasks.x", "Fortnightly", None, False),
		# A look-alike of the watchdog is any other job type.
		("btu.btu_core.alerts.check_x", "Cron", "* * * * *", True),
	],
)  # fmt: skip
def test_which_job_types_btu_takes(method, frequency, cron, taken):
	assert fj.fired_by_btu(method, frequency, cron, None) is taken


def test_a_job_type_compiles_to_a_cron_state_in_the_sites_zone():
	job = {"name": "app.daily", "method": "app.tasks.daily", "frequency": "Daily Long", "cron_format": None,
		"creation": datetime(2026, 1, 1), "modified": datetime(2026, 1, 1),
		"last_execution": datetime(2026, 3, 28, 0, 0, 5)}  # fmt: skip
	row = fj.JobTypeRow.of(job, None)
	assert (
		row.name == "frappe-job:app.daily"
		and RunKey.parse(row.name).kind is RunKind.FRAPPE_JOB
		and RunKey.parse(row.name).name == "app.daily"
	)
	assert (
		row.task_queue_name == "long"
		and row.policy.overlap_policy == "skip"
		and row.policy.catch_up_policy == "fire_once"
	)
	spec = ScheduleSpec.from_row(row.spec_columns(), system_time_zone="Europe/Berlin")
	# Midnight in Berlin, across the spring change (UTC+1 -> UTC+2 at 02:00 on 2026-03-29).
	assert spec.next_slot(datetime(2026, 3, 28, 12, tzinfo=UTC)) == datetime(2026, 3, 28, 23, tzinfo=UTC)
	assert spec.next_slot(datetime(2026, 3, 29, 12, tzinfo=UTC)) == datetime(2026, 3, 29, 22, tzinfo=UTC)


def test_long_job_types_are_spread_over_frappes_window_and_the_others_fire_at_their_slot():
	"""Frappe runs a Long frequency's job up to 600 s after its moment (a random delay), and the others at the first
	tick after it; BTU delays the Long ones by a hash of (job type, slot) within the same 600 s."""
	midnight = datetime(2026, 11, 29, 0, 0, tzinfo=UTC)  # a Sunday: Daily, Daily Long and Weekly Long are all due

	def fires(frequency: str) -> list[float]:
		"""The delay after midnight of each of 20 job types of the frequency."""
		specs = [
			ScheduleSpec.from_row(
				fj.JobTypeRow.of(
					{"name": f"app.job_{n}", "method": f"app.tasks.job_{n}", "frequency": frequency}, None
				).spec_columns(),
				system_time_zone="UTC",
			)
			for n in range(20)
		]
		return [(spec.fire_time(midnight) - midnight).total_seconds() for spec in specs]

	for frequency in ("Daily Long", "Weekly Long"):
		delays = fires(frequency)
		assert all(0 <= delay <= fj.LONG_JITTER_SECS for delay in delays), delays
		assert len(set(delays)) >= 15, f"20 {frequency} job types spread over the window, not on one instant: {delays}"
	assert fires("Daily") == [0.0] * 20 and fires("Hourly") == [0.0] * 20, (
		"the others fire at their slot, as Frappe's tick"
	)

	def hourly_long():
		return ScheduleSpec.from_row(
			fj.JobTypeRow.of(
				{"name": "app.h", "method": "app.tasks.h", "frequency": "Hourly Long"}, None
			).spec_columns(),
			system_time_zone="UTC",
		)

	slots = [midnight + timedelta(hours=h) for h in range(24)]
	assert [hourly_long().fire_time(slot) for slot in slots] == [hourly_long().fire_time(slot) for slot in slots], (
		"every process computes the same moments"
	)
	assert len({(hourly_long().fire_time(slot) - slot).total_seconds() for slot in slots}) > 1, (
		"a job type's delay changes from slot to slot"
	)


def test_a_row_without_a_cron_becomes_an_invalid_row_naming_cron_string():
	row = fj.JobTypeRow.of({"name": "x", "method": "app.x", "frequency": "Cron", "cron_format": ""}, None)
	with pytest.raises(Exception, match="cron_string"):
		ScheduleSpec.from_row(row.spec_columns(), system_time_zone="UTC")


def test_claim_keys_are_per_job_type_and_slot():
	slot = datetime(2026, 11, 24, 21, 0, tzinfo=UTC)
	assert fj.claim_key("a.b", slot) == "btu:frappe-job-slot:a.b:2026-11-24T21:00:00Z"
	assert fj.claim_key("a.b", slot) != fj.claim_key("a.bb", slot)
