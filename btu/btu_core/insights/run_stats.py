"""What the BTU dashboard shows, read from BTU Task Logs: a chart's period, its buckets, percentiles.

The database does the counting, so what a chart reads stays bounded however many runs there were:
runs per day and status, and each measure (a lag, a duration) per day (or Task) and per log-spaced
bucket: how many values, their least, greatest and sum (`summary_rows`). Percentiles come from those
buckets in Python (`Distribution`): nearest-rank (the value with that share of the values at or
below it), found in its bucket by rank and interpolated linearly between the bucket's least and
greatest value. The estimate and the true value share that bucket, whose greatest is below
10^(1/20) times its least, so a percentile is within RELATIVE_ERROR (12.2 %) of the exact one; it is
exact when its value is the bucket's least or greatest (one value alone in its bucket, say). The
max, the count and the mean are exact. Values below LOWEST (0.001 ms, 0.001 s) share one bucket.

The queries are frappe.qb's (Frappe v16 refuses SQL functions written as strings in get_list). They
skip get_list's row-level rules, so each first checks that the user may read BTU Task Logs (the
DocType's role permissions, Role Permission Manager included); BTU adds no User Permission or
permission query for Task Logs, and these charts are its managers'.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from datetime import date, datetime

import frappe
from frappe import _
from frappe.query_builder import Case, Criterion
from frappe.query_builder.functions import Count, Date, Extract, Floor, Max, Min, Sum
from frappe.utils import add_days, format_date, get_datetime, getdate, now_datetime, strip_html
from frappe.utils.dateutils import (
	get_dates_from_timegrain,
	get_from_date_from_timespan,
	get_period,
	get_period_beginning,
	get_period_ending,
)
from pypika.terms import CustomFunction, LiteralValue

from btu.btu_core.messages import input_error
from btu.shared import task_args

LOG = "BTU Task Log"
FINISHED = ("Succeeded", "Failed", "Timed Out")
FAILED = ("Failed", "Timed Out")
STATUSES = ("Succeeded", "Failed", "Timed Out", "Skipped", "Started")
TIMESPANS = ("Last Week", "Last Month", "Last Quarter", "Last Year", "Select Date Range")
TIMEGRAINS = ("Daily", "Weekly", "Monthly", "Quarterly", "Yearly")
BUCKETS_PER_DECADE = 20
RELATIVE_ERROR = 10 ** (1 / BUCKETS_PER_DECADE) - 1
LOWEST = 0.001
# The bucket of values below LOWEST: one below LOWEST's own.
BELOW_LOWEST = round(math.log10(LOWEST) * BUCKETS_PER_DECADE) - 1

Log10 = CustomFunction("LOG10", ["value"])
TimestampDiff = CustomFunction("TIMESTAMPDIFF", ["unit", "start", "end"])


@dataclass
class Distribution:
	"""Values as SQL summed them up: per bucket, [count, least, greatest, sum]."""

	buckets: dict[int, list] = field(default_factory=dict)

	def add(self, bucket: int, count: int, least: float, greatest: float, total: float) -> None:
		entry = self.buckets.get(bucket)
		if entry is None:
			self.buckets[bucket] = [count, least, greatest, total]
		else:
			entry[:] = [entry[0] + count, min(entry[1], least), max(entry[2], greatest), entry[3] + total]

	@property
	def count(self) -> int:
		return sum(entry[0] for entry in self.buckets.values())

	def least(self) -> float:
		return min(entry[1] for entry in self.buckets.values())

	def greatest(self) -> float:
		return max(entry[2] for entry in self.buckets.values())

	def mean(self) -> float:
		return sum(entry[3] for entry in self.buckets.values()) / self.count

	def percentile(self, share: float) -> float:
		"""The nearest-rank percentile (share 0.95 for the 95th), within RELATIVE_ERROR of the exact one."""
		rank = max(1, math.ceil(share * self.count))
		for bucket in sorted(self.buckets):
			count, least, greatest, _total = self.buckets[bucket]
			if rank <= count:
				return least if count == 1 else least + (greatest - least) * (rank - 1) / (count - 1)
			rank -= count
		raise ValueError("a percentile of no values")

	def spread(self) -> list[float]:
		"""[p50, p95, max], rounded to 3 decimals."""
		return [round(v, 3) for v in (self.percentile(0.5), self.percentile(0.95), self.greatest())]


def failure_rate(per_status: dict[str, int]) -> float:
	"""Failed and Timed Out over finished runs, in %, 2 decimals; 0 without finished runs."""
	finished = sum(per_status.get(status, 0) for status in FINISHED)
	failed = sum(per_status.get(status, 0) for status in FAILED)
	return round(100 * failed / finished, 2) if finished else 0


def spread_names(unit: str) -> list[str]:
	return [_("p50 ({0})").format(unit), _("p95 ({0})").format(unit), _("max ({0})").format(unit)]


@dataclass
class Period:
	"""[start, end) in the system time zone, cut into buckets of one timegrain."""

	start: datetime
	end: datetime
	timegrain: str
	_days: dict = field(default_factory=dict, repr=False)

	def bucket(self, moment) -> date:
		day = getdate(moment)
		if day not in self._days:
			self._days[day] = getdate(get_period_ending(day, self.timegrain))
		return self._days[day]

	def buckets(self) -> list[date]:
		last = (
			getdate(self.end)
			if get_datetime(self.end).time() != datetime.min.time()
			else add_days(getdate(self.end), -1)
		)
		return [getdate(d) for d in get_dates_from_timegrain(self.start, last, self.timegrain)]

	def label(self, bucket: date) -> str:
		"""The label Frappe's own time series charts give the bucket."""
		text = get_period(bucket, self.timegrain)
		return format_date(text, parse_day_first=True) if self.timegrain in ("Daily", "Weekly") else text


def period(chart, timespan=None, time_interval=None, from_date=None, to_date=None) -> Period:
	"""The period the Desk asked for, else the chart's own; "Select Date Range" includes its last day."""
	timespan = timespan or chart.get("timespan") or "Last Week"
	timegrain = time_interval or chart.get("time_interval") or "Daily"
	if timespan not in TIMESPANS:
		frappe.throw(_("Unknown period {0}: choose one of {1}").format(timespan, ", ".join(_(t) for t in TIMESPANS)))
	if timegrain not in TIMEGRAINS:
		frappe.throw(
			_("Unknown interval {0}: choose one of {1}").format(timegrain, ", ".join(_(t) for t in TIMEGRAINS))
		)
	if timespan != "Select Date Range":
		end = now_datetime()
		start = get_period_beginning(get_from_date_from_timespan(end, timespan), timegrain)
		return Period(get_datetime(start), end, timegrain)
	first, last = from_date or chart.get("from_date"), to_date or chart.get("to_date")
	if not (first and last) or getdate(first) > getdate(last):
		frappe.throw(_("A date range needs a From date on or before its To date (got {0} to {1})").format(first, last))
	return days(getdate(first), getdate(last), timegrain)


def days(first: date, last: date, timegrain: str = "Daily") -> Period:
	"""From the start of `first` to the end of `last`."""
	return Period(get_datetime(first), get_datetime(add_days(last, 1)), timegrain)


def today() -> Period:
	return days(getdate(), getdate())


def chart_request(chart_name=None, chart=None, filters=None) -> tuple[frappe._dict, frappe._dict]:
	"""The chart a custom source was called for and its filters (the caller's, else the chart's)."""
	if chart_name:
		if not isinstance(chart_name, str):
			frappe.throw(_("chart_name: give a Dashboard Chart's name, not {0}").format(type(chart_name).__name__))
		chart = frappe.get_doc("Dashboard Chart", chart_name).as_dict()
	chart = json_argument(chart, "chart") or {}
	if not isinstance(chart, dict):
		frappe.throw(_("chart: give the Dashboard Chart as a JSON object"))
	chart = frappe._dict(chart)
	filters = json_argument(filters, "filters") or json_argument(chart.get("filters_json"), "filters_json") or {}
	if not isinstance(filters, dict):
		frappe.throw(
			_("This chart takes its filters as fieldname: value pairs, got {0}").format(frappe.as_json(filters))
		)
	return chart, frappe._dict(filters)


def json_argument(value, field: str):
	"""A request's JSON text parsed (bounded: task_args.parse_json), or the value itself when it came parsed."""
	if not isinstance(value, str):
		return value
	try:
		return task_args.parse_json(value, field) if value.strip() else None
	except task_args.ArgumentsError as exc:
		frappe.throw(input_error(exc))


def task_log():
	"""The Task Log table for a query; refused unless the user may read Task Logs."""
	if not frappe.has_permission(LOG, "read"):
		frappe.throw(
			_(
				"User {0} may not read BTU Task Logs, which this chart or card counts: ask a System Manager for read "
				"access to {1} (Role Permission Manager)"
			).format(frappe.session.user, _(LOG)),
			frappe.PermissionError,
			title=_("Not permitted"),
		)
	return frappe.qb.DocType(LOG)


def task_filter(log, filters) -> list:
	return [log.task == filters.task] if filters.get("task") else []


def within_period(log, within: Period) -> list:
	return [log.date_time_started >= within.start, log.date_time_started < within.end]


def is_set(column):
	"""What get_list's "is set" means for a Float column: Frappe stores an unset Float as 0, not NULL."""
	return column != 0


def milliseconds_between(start, end):
	"""end - start in ms, as wall-clock differences (the columns hold naive system-time datetimes).

	The one expression MariaDB and Postgres spell differently, so the one place these queries branch.
	"""
	if frappe.db.db_type == "postgres":
		return Extract("epoch", end - start) * 1000
	return TimestampDiff(LiteralValue("MICROSECOND"), start, end) / 1000


def summary_rows(log, measure, group, conditions: Iterable) -> list[tuple]:
	"""(group, bucket, count, least, greatest, sum) of the measure's values per group and log-spaced bucket.

	At most one row per group and bucket: BUCKETS_PER_DECADE per decade the values span, however many runs.
	"""
	bucket = Case().when(measure >= LOWEST, Floor(Log10(measure) * BUCKETS_PER_DECADE)).else_(BELOW_LOWEST)
	query = (
		frappe.qb.from_(log)
		.select(group.as_("grp"), bucket.as_("bucket"), Count("*"), Min(measure), Max(measure), Sum(measure))
		.where(Criterion.all([measure.isnotnull(), *conditions]))
		.groupby(group.as_("grp"), bucket.as_("bucket"))
	)
	return query.run()


def distributions(log, measure, group, conditions: Iterable, key: Callable = lambda group: group) -> dict:
	"""key(group) -> the Distribution of the measure over the rows of the groups with that key."""
	found: dict = {}
	for grouped, bucket, count, least, greatest, total in summary_rows(log, measure, group, conditions):
		found.setdefault(key(grouped), Distribution()).add(
			int(bucket), int(count), float(least), float(greatest), float(total)
		)
	return found


def daily(log, measure, within: Period, conditions: Iterable = ()) -> dict[date, Distribution]:
	"""The measure's Distribution per period bucket (summed up per day in SQL)."""
	return distributions(
		log, measure, Date(log.date_time_started), [*within_period(log, within), *conditions], within.bucket
	)


def durations_per_task(within: Period, status: str, task: str | None = None) -> dict[str, Distribution]:
	"""Each Task's run times (s) of its runs with this status started within the period (an enqueued function's Logs
	have no Task and are not among them)."""
	log = task_log()
	conditions = [
		*within_period(log, within),
		log.status == status,
		is_set(log.execution_time),
		log.task.isnotnull(),
		log.task != "",
	]
	if task:
		conditions.append(log.task == task)
	return distributions(log, log.execution_time, log.task, conditions)


def status_counts(log, within: Period, conditions: Iterable = ()) -> dict[date, dict[str, int]]:
	"""Runs per bucket and status, counted per day in SQL."""
	day = Date(log.date_time_started)
	rows = (
		frappe.qb.from_(log)
		.select(day.as_("day"), log.status, Count("*"))
		.where(Criterion.all([*within_period(log, within), *conditions]))
		.groupby(day.as_("day"), log.status)
	).run()
	counts: dict[date, dict[str, int]] = {}
	for started, status, runs in rows:
		per_status = counts.setdefault(within.bucket(started), {})
		per_status[status] = per_status.get(status, 0) + int(runs)
	return counts


def timeseries(
	within: Period, per_bucket: dict, names: list[str], values: Callable[[object], list], empty: list | None = None
) -> dict:
	"""A chart over the period's buckets: values(entry) gives one value per dataset.

	A bucket without data shows `empty` (zero runs is a fact) or, without `empty`, is left out: the
	frappe-charts Frappe v15 and v16 ship (2.0.0-rc22, rc27) draw null as 0 and have no gaps, and a
	lag or a failure rate of 0 on a day nothing ran would be false. No data at all gives {}, which
	the Desk shows as "No Data".

	One bucket alone is drawn as bars (frappe-charts honours a dataset's chartType in a Line chart):
	a line needs two points, and frappe-charts first draws a chart with its last label dropped, so a
	one-point line is an empty path ("<path> attribute d: Unexpected end of attribute" in the
	console) and nothing shows. A marker at 0 starts the axis at 0, where bars stand (a Line
	chart's axis starts at its least value, and bars would hang below it).
	"""
	if not per_bucket:
		return {}
	buckets = [b for b in within.buckets() if empty is not None or b in per_bucket]
	columns = [values(per_bucket[b]) if b in per_bucket else empty for b in buckets]
	alone = {"chartType": "bar"} if len(buckets) == 1 else {}
	chart = {
		"labels": [within.label(b) for b in buckets],
		"datasets": [
			{"name": name, "values": [column[i] for column in columns], **alone} for i, name in enumerate(names)
		],
	}
	if alone:
		chart["yMarkers"] = [{"label": "", "value": 0}]
	return chart


def plain_label(text: str) -> str:
	"""A label safe where frappe-charts puts it: its tooltip title is innerHTML, so no '<' or '>' may reach it.

	Tags are dropped and stray angle brackets become look-alikes, so the axis (plain SVG text) still reads well.
	"""
	return strip_html(text or "").replace("<", "\u2039").replace(">", "\u203a").strip()
