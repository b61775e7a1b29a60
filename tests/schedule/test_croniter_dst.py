"""Why btu.shared.schedule matches cron itself instead of stepping croniter over aware datetimes.

Each case lists the fires the DST rule (Debian cron(8)) demands. BTU must
produce them; the installed croniter does not produce all of them. Seen:
croniter 2.0.7 returns the nonexistent 02:30 EST on spring-forward day
(really 03:30 EDT), skips the 01:00 daily run on fall-back day, and drops
the repeated hour of a */30 schedule; croniter 7.0 runs a fixed-time 01:00
or 01:30 job twice on fall-back day. If a future croniter gets every case
right, test_installed_croniter_gets_dst_wrong fails: then the own matcher
could be reconsidered.
"""

from __future__ import annotations

from datetime import datetime
from zoneinfo import ZoneInfo

import croniter as croniter_module
import pytest
from croniter import croniter

from btu.shared.schedule import ScheduleSpec

pytestmark = pytest.mark.versions

NY = ZoneInfo("America/New_York")
LH = ZoneInfo("Australia/Lord_Howe")
CASES = [
	# expression, zone, start, the fires the rule demands
	("30 2 * * *", NY, datetime(2025, 3, 8, 12, tzinfo=NY), ["2025-03-09T03:00:00-04:00", "2025-03-10T02:30:00-04:00"]),
	("0 1 * * *", NY, datetime(2025, 11, 1, 12, tzinfo=NY), ["2025-11-02T01:00:00-04:00", "2025-11-03T01:00:00-05:00"]),
	(
		"30 1 * * *",
		NY,
		datetime(2025, 11, 2, 1, 35, tzinfo=NY),
		["2025-11-03T01:30:00-05:00", "2025-11-04T01:30:00-05:00"],
	),
	(
		"*/30 * * * *",
		NY,
		datetime(2025, 11, 2, 0, 40, tzinfo=NY),
		[
			"2025-11-02T01:00:00-04:00",
			"2025-11-02T01:30:00-04:00",
			"2025-11-02T01:00:00-05:00",
			"2025-11-02T01:30:00-05:00",
		],
	),
	(
		"15 2 * * *",
		LH,
		datetime(2025, 10, 4, 12, tzinfo=LH),
		["2025-10-05T02:30:00+11:00", "2025-10-06T02:15:00+11:00"],
	),
]


def instants(values: list[str]) -> list[float]:
	return [datetime.fromisoformat(v).timestamp() for v in values]


def test_btu_follows_the_rule():
	for expression, zone, start, expected in CASES:
		spec = ScheduleSpec(name="c", zone_name=zone.key, kind="cron", cron=expression)
		got = [f.astimezone(zone).isoformat() for f in spec.preview(len(expected), start)]
		assert got == expected, expression


def test_installed_croniter_gets_dst_wrong():
	wrong = []
	for expression, zone, start, expected in CASES:
		it = croniter(expression, start)
		got = [it.get_next(datetime) for _ in expected]
		if [g.timestamp() for g in got] != instants(expected):
			wrong.append((expression, [g.isoformat() for g in got]))
	version = getattr(croniter_module, "__version__", "?")
	assert wrong, f"croniter {version} now follows the DST rule in every case"
