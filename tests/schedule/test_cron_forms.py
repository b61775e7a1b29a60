"""Every cron form the README documents gives the same fires whichever croniter is installed.

Frappe v15 ships croniter 2.0 and v16 ships 6.0; 6.0 refuses day-of-week 7
(Sunday, which BTU documents) and 7.0 reads a-a as a wrap-around range.
BTU parses and expands cron itself, so this one table holds on every tier-1
leg. The fires were checked by hand: 2025-01-01 is a Wednesday.
"""

from __future__ import annotations

import subprocess
import sys

import pytest

from btu.scheduler_daemon.cli import main
from btu.shared.schedule.cron import FIVE, CronExpression
from tests.support.slack import patient

pytestmark = pytest.mark.versions

AFTER = "2025-01-01T00:00:00"
SUNDAYS = [
	"2025-01-05T00:00:00+00:00",
	"2025-01-12T00:00:00+00:00",
	"2025-01-19T00:00:00+00:00",
	"2025-01-26T00:00:00+00:00",
]
NINE_WEEKDAYS = [
	"2025-01-01T09:00:00+00:00",
	"2025-01-02T09:00:00+00:00",
	"2025-01-03T09:00:00+00:00",
	"2025-01-06T09:00:00+00:00",
]
MIDNIGHTS = [
	"2025-01-02T00:00:00+00:00",
	"2025-01-03T00:00:00+00:00",
	"2025-01-04T00:00:00+00:00",
	"2025-01-05T00:00:00+00:00",
]
NEW_YEARS = [
	"2026-01-01T00:00:00+00:00",
	"2027-01-01T00:00:00+00:00",
	"2028-01-01T00:00:00+00:00",
	"2029-01-01T00:00:00+00:00",
]


def days(*values: str) -> list[str]:
	return [f"2025-{v}T00:00:00+00:00" for v in values]


# expression, its next 4 fires in UTC after AFTER
FORMS = [
	# day-of-week: 0 and 7 are Sunday, names in any case, ranges and steps through 7
	("0 0 * * 7", SUNDAYS),
	("0 0 * * 0", SUNDAYS),
	("0 0 * * sun", SUNDAYS),
	("0 0 * * SUN", SUNDAYS),
	("0 0 * * 7/2", SUNDAYS),  # 7-7/2: Sunday alone
	("0 0 * * 5-7", days("01-03", "01-04", "01-05", "01-10")),  # Fri, Sat, Sun
	("0 0 * * 1-7/2", days("01-03", "01-05", "01-06", "01-08")),  # Mon, Wed, Fri, Sun
	("0 0 * * */2", days("01-02", "01-04", "01-05", "01-07")),  # Sun, Tue, Thu, Sat
	("0 0 * * 1/2", days("01-03", "01-06", "01-08", "01-10")),  # 1-6/2: Mon, Wed, Fri
	("0 0 * * 6/2", days("01-04", "01-11", "01-18", "01-25")),
	("0 9 * * 1-5", NINE_WEEKDAYS),
	("0 9 * * mon-fri", NINE_WEEKDAYS),
	(
		"0 9 * * MON,wed,Fri",
		[
			"2025-01-01T09:00:00+00:00",
			"2025-01-03T09:00:00+00:00",
			"2025-01-06T09:00:00+00:00",
			"2025-01-08T09:00:00+00:00",
		],
	),
	# minute and hour: values, lists, ranges, steps
	(
		"15 10 * * *",
		[
			"2025-01-01T10:15:00+00:00",
			"2025-01-02T10:15:00+00:00",
			"2025-01-03T10:15:00+00:00",
			"2025-01-04T10:15:00+00:00",
		],
	),
	(
		"*/20 * * * *",
		[
			"2025-01-01T00:20:00+00:00",
			"2025-01-01T00:40:00+00:00",
			"2025-01-01T01:00:00+00:00",
			"2025-01-01T01:20:00+00:00",
		],
	),
	(
		"5-40/15 9 * * *",
		[
			"2025-01-01T09:05:00+00:00",
			"2025-01-01T09:20:00+00:00",
			"2025-01-01T09:35:00+00:00",
			"2025-01-02T09:05:00+00:00",
		],
	),
	(
		"50/5 23 * * *",
		[
			"2025-01-01T23:50:00+00:00",
			"2025-01-01T23:55:00+00:00",
			"2025-01-02T23:50:00+00:00",
			"2025-01-02T23:55:00+00:00",
		],
	),
	# a-a is one value (croniter 7 reads it as every value): 05:01 on 3 February or a Thursday in February
	(
		"1-1 5-5/3 3-3 2-2 4-4",
		[
			"2025-02-03T05:01:00+00:00",
			"2025-02-06T05:01:00+00:00",
			"2025-02-13T05:01:00+00:00",
			"2025-02-20T05:01:00+00:00",
		],
	),
	# day-of-month and month
	(
		"0 9 1,15 * *",
		[
			"2025-01-01T09:00:00+00:00",
			"2025-01-15T09:00:00+00:00",
			"2025-02-01T09:00:00+00:00",
			"2025-02-15T09:00:00+00:00",
		],
	),
	(
		"0 0 1 FEB-Mar *",
		[
			"2025-02-01T00:00:00+00:00",
			"2025-03-01T00:00:00+00:00",
			"2026-02-01T00:00:00+00:00",
			"2026-03-01T00:00:00+00:00",
		],
	),
	(
		"0 0 1 jan,jul *",
		[
			"2025-07-01T00:00:00+00:00",
			"2026-01-01T00:00:00+00:00",
			"2026-07-01T00:00:00+00:00",
			"2027-01-01T00:00:00+00:00",
		],
	),
	(
		"0 0 1 */4 *",
		[
			"2025-05-01T00:00:00+00:00",
			"2025-09-01T00:00:00+00:00",
			"2026-01-01T00:00:00+00:00",
			"2026-05-01T00:00:00+00:00",
		],
	),
	("0 0 31 * *", days("01-31", "03-31", "05-31", "07-31")),
	(
		"0 0 29 2 *",
		[
			"2028-02-29T00:00:00+00:00",
			"2032-02-29T00:00:00+00:00",
			"2036-02-29T00:00:00+00:00",
			"2040-02-29T00:00:00+00:00",
		],
	),
	# both day fields restricted: either matches; one starting with '*': both must
	("0 0 13 * fri", days("01-03", "01-10", "01-13", "01-17")),
	("0 0 */10 * fri", days("01-31", "02-21", "03-21", "04-11")),
	# 6 fields: leading seconds
	(
		"*/15 * * * * *",
		[
			"2025-01-01T00:00:15+00:00",
			"2025-01-01T00:00:30+00:00",
			"2025-01-01T00:00:45+00:00",
			"2025-01-01T00:01:00+00:00",
		],
	),
	(
		"30 0 12 * * *",
		[
			"2025-01-01T12:00:30+00:00",
			"2025-01-02T12:00:30+00:00",
			"2025-01-03T12:00:30+00:00",
			"2025-01-04T12:00:30+00:00",
		],
	),
	# macros
	(
		"@hourly",
		[
			"2025-01-01T01:00:00+00:00",
			"2025-01-01T02:00:00+00:00",
			"2025-01-01T03:00:00+00:00",
			"2025-01-01T04:00:00+00:00",
		],
	),
	("@daily", MIDNIGHTS),
	("@midnight", MIDNIGHTS),
	("@weekly", SUNDAYS),
	("@monthly", days("02-01", "03-01", "04-01", "05-01")),
	("@yearly", NEW_YEARS),
	("@annually", NEW_YEARS),
]


def next_fires(expression: str, capsys) -> list[str]:
	code = main(["next", "--cron", expression, "--tz", "UTC", "--after", AFTER, "-n", "4"])
	out, err = capsys.readouterr()
	assert code == 0, err
	return out.split()


@pytest.mark.parametrize("expression, fires", FORMS, ids=[f[0] for f in FORMS])
def test_documented_form_fires(expression, fires, capsys):
	assert next_fires(expression, capsys) == fires


def test_sunday_as_seven_from_the_command_line():
	"""`btu-scheduler next --cron "0 0 * * 7"` as a user runs it (croniter 6 alone refuses it)."""
	result = subprocess.run(
		[
			sys.executable,
			"-m",
			"btu.scheduler_daemon",
			"next",
			"--cron",
			"0 0 * * 7",
			"--tz",
			"UTC",
			"--after",
			AFTER,
			"-n",
			"4",
		],
		capture_output=True,
		text=True,
		timeout=patient(60),
	)
	assert result.returncode == 0, result.stderr
	assert result.stdout.split() == SUNDAYS


@pytest.mark.parametrize(
	"expression, fires",
	[f for f in FORMS if len(f[0].split()) == 5],
	ids=[f[0] for f in FORMS if len(f[0].split()) == 5],
)
def test_installed_croniter_means_the_same_where_it_accepts_the_form(expression, fires):
	"""BTU's expansion is croniter 2.0's (Frappe v15's) meaning: where the installed croniter takes a form, it
	agrees."""
	from croniter import croniter

	expr = CronExpression(expression)
	try:
		theirs, _ = croniter.expand(expr.canonical)
	except Exception:
		pytest.skip(f"the installed croniter refuses {expr.canonical!r}; BTU does not ask it")
	ours = (expr.minutes, expr.hours, expr.doms, expr.months, tuple(sorted(expr.dows)))
	for name, mine, values in zip(FIVE, ours, theirs):
		low = 0 if name in ("minute", "hour", "day-of-week") else 1
		high = {"minute": 59, "hour": 23, "day-of-month": 31, "month": 12, "day-of-week": 6}[name]
		expanded = range(low, high + 1) if values == ["*"] else values
		assert mine == tuple(sorted({0 if name == "day-of-week" and v == 7 else int(v) for v in expanded})), name
