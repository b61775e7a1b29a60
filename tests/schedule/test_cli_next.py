"""`btu-scheduler next` as a user runs it: a subprocess, no service."""

from __future__ import annotations

import subprocess
import sys

import pytest

from tests.support.slack import patient

pytestmark = pytest.mark.versions


def run(*args: str) -> subprocess.CompletedProcess:
	return subprocess.run(
		[sys.executable, "-m", "btu.scheduler_daemon", "next", *args],
		capture_output=True,
		text=True,
		timeout=patient(60),
	)


def test_prints_instants_with_offsets_in_the_zone():
	result = run("--cron", "30 2 * * *", "--tz", "America/New_York", "--after", "2025-03-07T12:00:00", "-n", "4")
	assert result.returncode == 0, result.stderr
	assert result.stdout.splitlines() == [
		"2025-03-08T02:30:00-05:00",
		"2025-03-09T03:00:00-04:00",  # 02:30 does not exist: the end of the gap
		"2025-03-10T02:30:00-04:00",
		"2025-03-11T02:30:00-04:00",
	]


def test_aware_after_and_default_count():
	result = run("--cron", "*/10 * * * * *", "--tz", "+05:30", "--after", "2025-01-01T00:00:00+00:00")
	assert result.returncode == 0, result.stderr
	lines = result.stdout.splitlines()
	assert len(lines) == 10
	assert lines[0] == "2025-01-01T05:30:10+05:30" and lines[-1] == "2025-01-01T05:31:40+05:30"


def test_bad_expression_exits_2_with_the_message():
	result = run("--cron", "61 * * * *")
	assert result.returncode == 2 and result.stdout == ""
	assert "cron_string '61 * * * *': minute 61 is outside 0-59" in result.stderr


def test_bad_zone_and_after_exit_2():
	zone = run("--cron", "* * * * *", "--tz", "Mars/Olympus")
	assert zone.returncode == 2 and "time_zone 'Mars/Olympus'" in zone.stderr
	after = run("--cron", "* * * * *", "--after", "yesterday")
	assert after.returncode == 2 and "--after 'yesterday'" in after.stderr
