"""The BTU Desk dashboard: its chart sources and number cards give the figures of known Task Logs, to BTU roles only.

Counts, max, min and means are exact. Percentiles come from the log-spaced buckets the database counts
(btu.btu_core.insights.run_stats): each is checked to be within run_stats.RELATIVE_ERROR (12.2 %) of the exact
nearest-rank value, the precision the bucketing promises, not to equal it.
"""

import math
import random
from datetime import datetime, timedelta

import frappe
from frappe.permissions import update_permission_property
from frappe.query_builder.functions import Date
from frappe.translate import clear_cache as clear_translation_cache
from frappe.utils import formatdate, getdate, now_datetime

from btu.btu_core.dashboard_chart_source.btu_duration_percentiles import btu_duration_percentiles as durations
from btu.btu_core.dashboard_chart_source.btu_failure_rate import btu_failure_rate as failure_rate
from btu.btu_core.dashboard_chart_source.btu_lag_percentiles import btu_lag_percentiles as lag
from btu.btu_core.dashboard_chart_source.btu_runs_by_status import btu_runs_by_status as runs
from btu.btu_core.insights import dashboard_cards, metrics, run_stats
from btu.btu_core.report.task_duration_averages import task_duration_averages
from btu.btu_core.setup import install
from btu.btu_core.tests.utils import make_task, make_user

try:
	from frappe.tests import IntegrationTestCase
except ImportError:
	from frappe.tests.utils import FrappeTestCase as IntegrationTestCase

PLAIN_USER = "btu-dashboard-plain@example.com"
MANAGER = "btu-dashboard-manager@example.com"
MONDAY, TUESDAY, WEDNESDAY, NEXT_MONDAY = (datetime(2001, 3, d, 10) for d in (5, 6, 7, 12))
RANGE = {"timespan": "Select Date Range", "from_date": "2001-03-05", "to_date": "2001-03-07"}
HOSTILE = '<img src=x onerror="alert(1)">Slow sync'
SOURCES = {
	"BTU Fire Lag": lag.get,
	"BTU Failure Rate": failure_rate.get,
	"BTU Runs per Day": runs.get,
	"BTU Task Durations": durations.get,
}
CARDS = (dashboard_cards.failure_rate_today, dashboard_cards.fire_lag_p95_today)
LANGUAGE = "btuxx"


def log(task, started, status="Succeeded", seconds=None, fire_lag_ms=None, slot=None):
	return frappe.get_doc(
		{
			"doctype": "BTU Task Log",
			"task": task,
			"status": status,
			"date_time_started": started,
			"execution_time": seconds,
			"fire_lag_ms": fire_lag_ms,
			"slot": slot,
		}
	).insert(ignore_permissions=True)


def bulk_logs(task, rows):
	"""Task Logs straight into the table, many at once: rows of (started, status, fire_lag_ms, seconds)."""
	now, tag = now_datetime(), frappe.generate_hash(length=8)
	fields = [
		"name",
		"creation",
		"modified",
		"owner",
		"modified_by",
		"docstatus",
		"idx",
		"task",
		"date_time_started",
		"status",
		"fire_lag_ms",
		"execution_time",
	]
	values = (
		(f"bulk-{tag}-{i}", now, now, "Administrator", "Administrator", 0, 0, task, *row) for i, row in enumerate(rows)
	)
	frappe.db.bulk_insert("BTU Task Log", fields, values)


def nearest_rank(values, share):
	"""The exact nearest-rank percentile, which the charts estimate."""
	ordered = sorted(values)
	return ordered[max(0, math.ceil(share * len(ordered)) - 1)]


def day_labels(*days):
	return [formatdate(getdate(day)) for day in days]


def values(chart):
	return {dataset["name"]: dataset["values"] for dataset in chart["datasets"]}


class DashboardTestCase(IntegrationTestCase):
	"""The users and Tasks the dashboard's tests share; its subclasses hold the tests."""

	def setUp(self):
		make_user(PLAIN_USER)
		make_user(MANAGER, ("BTU Manager",))
		self.task = make_task(desc_short="dashboard main").name
		self.other = make_task(desc_short="dashboard other").name

	def tearDown(self):
		frappe.set_user("Administrator")
		frappe.db.rollback()
		frappe.clear_cache(doctype=run_stats.LOG)  # a test's custom permissions, rolled back

	def lag_chart(self, measure="Fire Lag", **arguments):
		filters = {"measure": measure, "task": self.task, **arguments.pop("filters", {})}
		return lag.get(chart_name="BTU Fire Lag", filters=filters, **{**RANGE, "time_interval": "Daily", **arguments})


class TestDashboard(DashboardTestCase):
	"""The figures: percentiles, rates and counts of known Task Logs, their filters and labels."""

	def assertSpread(self, got: dict, exact: dict, unit="ms"):
		"""p50 and p95 within the buckets' RELATIVE_ERROR of the exact ones (plus the 3 decimals' rounding), max
		exact."""
		self.assertEqual(got[f"max ({unit})"], exact[f"max ({unit})"])
		for name in (f"p50 ({unit})", f"p95 ({unit})"):
			self.assertEqual(len(got[name]), len(exact[name]), name)
			for estimate, value in zip(got[name], exact[name]):
				self.assertLessEqual(
					abs(estimate - value),
					run_stats.RELATIVE_ERROR * value + 0.0005,
					f"{name}: {got[name]} for {exact[name]}",
				)

	def test_fire_lag_gives_nearest_rank_percentiles_per_day(self):
		for ms in range(20, 0, -1):
			log(self.task, MONDAY + timedelta(seconds=ms), fire_lag_ms=ms)
		log(self.task, TUESDAY, fire_lag_ms=5)
		log(self.task, TUESDAY, fire_lag_ms=None)  # run now: no slot, no lag
		chart = self.lag_chart()
		# Wednesday had no scheduled run: left out, not drawn as a lag of 0.
		self.assertEqual(chart["labels"], day_labels(MONDAY, TUESDAY))
		self.assertSpread(values(chart), {"p50 (ms)": [10, 5], "p95 (ms)": [19, 5], "max (ms)": [20, 5]})
		self.assertNotIn("yMarkers", chart)  # two days: lines

	def test_a_week_takes_percentiles_of_all_its_runs_not_of_its_days(self):
		for ms in range(1, 21):
			log(self.task, MONDAY, fire_lag_ms=ms)
		log(self.task, TUESDAY, fire_lag_ms=5)
		chart = self.lag_chart(time_interval="Weekly", from_date="2001-03-05", to_date="2001-03-06")
		self.assertEqual(len(chart["labels"]), 1)
		# 21 values 1..20 and 5: the 11th is 10, the 20th is 19.
		self.assertSpread(values(chart), {"p50 (ms)": [10], "p95 (ms)": [19], "max (ms)": [20]})
		# One bucket alone is drawn as bars standing on 0 (frappe-charts draws no line of one point).
		self.assertEqual(({d.get("chartType") for d in chart["datasets"]}, chart["yMarkers"][0]["value"]), ({"bar"}, 0))

	def test_start_lag_is_the_start_minus_the_slot(self):
		for ms in (250, 1000, 40):
			log(self.task, MONDAY + timedelta(milliseconds=ms), slot=MONDAY, fire_lag_ms=1)
		log(self.task, TUESDAY)  # no slot: not a scheduled run
		chart = self.lag_chart("Start Lag")
		self.assertEqual(chart["labels"], day_labels(MONDAY))
		self.assertSpread(values(chart), {"p50 (ms)": [250], "p95 (ms)": [1000], "max (ms)": [1000]})

	def test_percentiles_stay_within_the_promised_error_over_many_decades(self):
		"""3,000 lags spread log-uniformly from 1 µs to 1,000 s (every bucket), with repeats: each day's p50, p95
		against the exact."""
		rng = random.Random(17)
		lags = {day: [round(10 ** rng.uniform(-3, 6), 3) for _ in range(1000)] for day in (MONDAY, TUESDAY, WEDNESDAY)}
		lags[TUESDAY][:300] = [42.0] * 300
		bulk_logs(self.task, [(day, "Succeeded", ms, 1) for day, found in lags.items() for ms in found])
		exact = {
			"p50 (ms)": [nearest_rank(found, 0.5) for found in lags.values()],
			"p95 (ms)": [nearest_rank(found, 0.95) for found in lags.values()],
			"max (ms)": [max(found) for found in lags.values()],
		}
		self.assertSpread(values(self.lag_chart()), exact)

	def test_a_percentile_alone_or_at_the_edge_of_its_bucket_is_exact(self):
		found = run_stats.Distribution()
		found.add(0, 1, 1.5, 1.5, 1.5)  # one value alone
		found.add(7, 4, 2.2, 2.4, 9.2)  # four values from 2.2 to 2.4
		self.assertEqual((found.percentile(0.2), found.percentile(0.4), found.percentile(1.0)), (1.5, 2.2, 2.4))
		self.assertEqual((found.count, found.least(), found.greatest(), found.mean()), (5, 1.5, 2.4, 10.7 / 5))
		with self.assertRaises(ValueError):
			run_stats.Distribution().percentile(0.5)

	def test_many_runs_are_summed_up_in_sql_and_the_rows_read_stay_bounded(self):
		"""200,000 runs in a week (50 schedules every minute): the old chart read them all (and refused past
		500,000)."""
		days = [MONDAY + timedelta(days=d) for d in range(7)]
		rows = [
			(
				days[i % 7] + timedelta(seconds=i % 3600),
				"Failed" if i % 10 == 0 else "Succeeded",
				1 + (i * 7919) % 10_000,
				0.5,
			)
			for i in range(200_000)
		]
		bulk_logs(self.task, rows)
		log_table = run_stats.task_log()
		grouped = run_stats.summary_rows(
			log_table, log_table.fire_lag_ms, Date(log_table.date_time_started), [log_table.task == self.task]
		)
		# Lags from 1 to 10,000 ms span 4 decades: at most 81 buckets a day, whatever the number of runs.
		self.assertLessEqual(len(grouped), 7 * 81)
		self.assertEqual(sum(row[2] for row in grouped), 200_000)
		week = {"from_date": "2001-03-05", "to_date": "2001-03-11"}
		chart = self.lag_chart(**week)
		per_day = [[lag for started, _status, lag, _s in rows if started.date() == day.date()] for day in days]
		exact = {
			"p50 (ms)": [nearest_rank(d, 0.5) for d in per_day],
			"p95 (ms)": [nearest_rank(d, 0.95) for d in per_day],
			"max (ms)": [max(d) for d in per_day],
		}
		self.assertSpread(values(chart), exact)
		counted = runs.get(
			chart_name="BTU Runs per Day",
			filters={"task": self.task},
			time_interval="Daily",
			timespan="Select Date Range",
			**week,
		)
		self.assertEqual(sum(values(counted)["Succeeded"]) + sum(values(counted)["Failed"]), 200_000)
		rate = failure_rate.get(
			chart_name="BTU Failure Rate",
			filters={"task": self.task},
			time_interval="Monthly",
			timespan="Select Date Range",
			**week,
		)
		self.assertEqual(values(rate), {"Failure rate (%)": [10.0]})

	def test_failure_rate_is_failed_and_timed_out_over_finished_runs(self):
		for status in ("Succeeded", "Succeeded", "Succeeded", "Failed", "Timed Out", "Skipped", "Skipped", "Started"):
			log(self.task, MONDAY, status)
		for _ in range(4):
			log(self.task, TUESDAY)
		log(self.other, TUESDAY, "Failed")
		log(self.task, WEDNESDAY, "Skipped")
		chart = failure_rate.get(
			chart_name="BTU Failure Rate", filters={"task": self.task}, time_interval="Daily", **RANGE
		)
		# Wednesday had no finished run: no rate, left out rather than drawn as 0 %.
		self.assertEqual(chart["labels"], day_labels(MONDAY, TUESDAY))
		self.assertEqual(values(chart), {"Failure rate (%)": [40.0, 0]})
		every_task = failure_rate.get(chart_name="BTU Failure Rate", filters={}, time_interval="Daily", **RANGE)
		self.assertEqual(values(every_task), {"Failure rate (%)": [40.0, 20.0]})

	def test_runs_by_status_counts_each_status_per_day(self):
		for status in ("Succeeded", "Succeeded", "Failed", "Skipped", "Started", "Timed Out"):
			log(self.task, MONDAY, status)
		log(self.task, WEDNESDAY, "Failed")
		chart = runs.get(chart_name="BTU Runs per Day", filters={"task": self.task}, time_interval="Daily", **RANGE)
		self.assertEqual(
			values(chart),
			{
				"Succeeded": [2, 0, 0],
				"Failed": [1, 0, 1],
				"Timed Out": [1, 0, 0],
				"Skipped": [1, 0, 0],
				"Started": [1, 0, 0],
			},
		)

	def test_duration_percentiles_per_task_slowest_p95_first(self):
		for tenths in range(1, 11):
			log(self.task, MONDAY, seconds=tenths / 10)
		log(self.task, TUESDAY, "Failed", seconds=99)
		log(self.task, MONDAY, "Started")  # running: no duration yet
		for seconds in (2, 4):
			log(self.other, TUESDAY, seconds=seconds)
		chart = durations.get(
			chart_name="BTU Task Durations",
			filters={"timespan": "Select Date Range"},
			from_date=RANGE["from_date"],
			to_date=RANGE["to_date"],
		)
		self.assertEqual(chart["labels"], ["dashboard other", "dashboard main"])
		self.assertSpread(values(chart), {"p50 (s)": [2, 0.5], "p95 (s)": [4, 1.0], "max (s)": [4, 1.0]}, "s")
		failed = durations.get(
			chart_name="BTU Task Durations",
			filters={"timespan": "Select Date Range", "status": "Failed"},
			**{k: RANGE[k] for k in ("from_date", "to_date")},
		)
		self.assertEqual((failed["labels"], values(failed)["max (s)"]), (["dashboard main"], [99]))

	def test_filters_narrow_to_the_task_and_the_dates(self):
		log(self.task, MONDAY, fire_lag_ms=3)
		log(self.other, MONDAY, fire_lag_ms=300)
		log(self.task, NEXT_MONDAY, fire_lag_ms=3000)
		log(self.task, datetime(2001, 3, 4, 23, 59, 59), fire_lag_ms=30000)  # the day before the range
		self.assertEqual(values(self.lag_chart())["max (ms)"], [3])
		every_task = lag.get(chart_name="BTU Fire Lag", filters={"measure": "Fire Lag"}, time_interval="Daily", **RANGE)
		self.assertEqual(values(every_task)["max (ms)"], [300])
		one_day = self.lag_chart(from_date="2001-03-12", to_date="2001-03-12")
		self.assertEqual((len(one_day["labels"]), values(one_day)["max (ms)"]), (1, [3000]))

	def test_the_chart_s_own_period_applies_when_the_desk_sends_none(self):
		log(self.task, now_datetime() - timedelta(days=2), fire_lag_ms=7)
		log(self.task, now_datetime() - timedelta(days=40), fire_lag_ms=700)
		chart = lag.get(
			chart_name="BTU Fire Lag", filters={"measure": "Fire Lag", "task": self.task}
		)  # Last Week, Daily
		self.assertEqual(values(chart)["max (ms)"], [7])
		self.assertEqual(chart["labels"], day_labels(now_datetime() - timedelta(days=2)))

	def test_no_data_gives_an_empty_chart(self):
		log(self.task, MONDAY, fire_lag_ms=3, seconds=1)
		dates = {"from_date": "1999-01-01", "to_date": "1999-01-31"}
		for name, get in SOURCES.items():
			with self.subTest(chart=name):
				if get is durations.get:
					self.assertEqual(get(chart_name=name, filters={"timespan": "Select Date Range"}, **dates), {})
				else:
					self.assertEqual(get(chart_name=name, timespan="Select Date Range", **dates), {})

	def test_hostile_task_descriptions_reach_the_chart_as_plain_text(self):
		hostile = {
			HOSTILE: "Slow sync",
			"1 < 2": "1 \u2039 2",
			"3 > 2": "3 \u203a 2",
			"<script>alert(1)</script>": "alert(1)",
			"<b></b>": None,
		}
		tasks = {}
		for text, label in hostile.items():
			task = make_task(desc_short="plain").name
			# Straight into the table: Frappe's save would sanitize some of these, other paths (SQL, imports) need not.
			frappe.db.set_value("BTU Task", task, "desc_short", text)
			tasks[task] = label
		for task in tasks:
			log(task, MONDAY, seconds=1)
		chart = durations.get(
			chart_name="BTU Task Durations",
			filters={"timespan": "Select Date Range"},
			from_date="2001-03-05",
			to_date="2001-03-05",
		)
		for label in chart["labels"]:
			self.assertNotIn("<", label)
			self.assertNotIn(">", label)
		expected = {text or task for task, text in tasks.items()}
		self.assertEqual(set(chart["labels"]), expected)

	def test_the_duration_report_shares_the_percentile_and_the_plain_labels(self):
		frappe.db.set_value("BTU Task", self.task, "desc_short", HOSTILE)
		for tenths in range(1, 21):
			log(self.task, MONDAY, seconds=tenths / 10)
		log(self.task, TUESDAY, seconds=50)  # the day after the report's
		_columns, data, _message, chart = task_duration_averages.execute(
			{"from_date": "2001-03-05", "to_date": "2001-03-05", "task": self.task}
		)
		self.assertEqual([data[0][k] for k in ("runs", "min", "max")], [20, 0.1, 2.0])
		self.assertAlmostEqual(data[0]["avg"], 1.05)
		self.assertLessEqual(abs(data[0]["p95"] - 1.9), run_stats.RELATIVE_ERROR * 1.9)
		self.assertEqual(chart["data"]["labels"], ["Slow sync"])

	def test_tasks_sharing_a_description_are_told_apart(self):
		twin = make_task(desc_short="dashboard main").name
		log(self.task, MONDAY, seconds=1)
		log(twin, MONDAY, seconds=2)
		chart = durations.get(
			chart_name="BTU Task Durations",
			filters={"timespan": "Select Date Range"},
			from_date="2001-03-05",
			to_date="2001-03-05",
		)
		self.assertEqual(chart["labels"], [f"dashboard main ({twin})", f"dashboard main ({self.task})"])

	def test_today_s_cards(self):
		today = getdate()
		frappe.db.delete("BTU Task Log", {"date_time_started": (">=", today)})  # rolled back in tearDown
		self.assertEqual(
			(dashboard_cards.failure_rate_today()["value"], dashboard_cards.fire_lag_p95_today()), (0, "No runs")
		)
		started = datetime.combine(today, datetime.min.time()) + timedelta(seconds=1)
		for ms, status in ((2, "Succeeded"), (4, "Failed"), (8, "Succeeded"), (16, "Skipped")):
			log(self.task, started, status, fire_lag_ms=ms)
		log(self.task, started - timedelta(seconds=2), "Failed", fire_lag_ms=1000)  # yesterday
		rate, p95 = dashboard_cards.failure_rate_today(), dashboard_cards.fire_lag_p95_today()
		self.assertEqual((rate["value"], rate["fieldtype"]), (33.33, "Percent"))
		self.assertEqual(p95, "16 ms")  # alone in its bucket: exact
		count = frappe.get_doc("Number Card", "BTU Runs Today")
		self.assertEqual(
			len(frappe.get_list("BTU Task Log", filters=frappe.parse_json(count.filters_json), pluck="name")), 4
		)

	def test_bad_filters_are_refused_by_name(self):
		cases = (
			({"filters": {"measure": "Heat"}}, "Unknown measure Heat"),
			({"timespan": "Last Century"}, "Unknown period Last Century"),
			({"time_interval": "Hourly"}, "Unknown interval Hourly"),
			({"from_date": "2001-03-07", "to_date": "2001-03-05"}, "From date on or before its To date"),
		)
		for arguments, message in cases:
			with self.subTest(arguments=arguments), self.assertRaises(frappe.ValidationError) as caught:
				self.lag_chart(**arguments)
			self.assertIn(message, str(caught.exception))
		with self.assertRaises(frappe.ValidationError) as caught:
			durations.get(chart_name="BTU Task Durations", filters={"status": "Started"})
		self.assertIn("Unknown status Started", str(caught.exception))

	def test_the_dashboard_and_its_index_are_installed(self):
		dashboard = frappe.get_doc("Dashboard", "BTU Dashboard")
		self.assertEqual(
			{link.chart for link in dashboard.charts} - set(SOURCES), {"BTU Start Lag", "BTU Average Duration per Day"}
		)
		self.assertEqual(len(dashboard.cards), 3)
		workspace = frappe.get_doc("Workspace", "BTU")
		self.assertIn("BTU Dashboard", [s.link_to for s in workspace.shortcuts if s.type == "Dashboard"])
		self.assertEqual({c.number_card_name for c in workspace.number_cards}, {c.card for c in dashboard.cards})
		self.assertTrue(frappe.db.get_column_index("tabBTU Task Log", "date_time_started", unique=False))


class TestDashboardAccess(DashboardTestCase):
	"""To BTU roles only: who sees the charts and cards, and how a refusal reads."""

	def test_users_without_a_btu_role_get_nothing(self):
		log(self.task, MONDAY, fire_lag_ms=3, seconds=1)
		for user in ("Guest", PLAIN_USER):
			frappe.set_user(user)
			for name, get in SOURCES.items():
				with self.subTest(user=user, chart=name), self.assertRaises(frappe.PermissionError):
					get(chart_name=name, **RANGE)
			for card in CARDS:
				with self.subTest(user=user, card=card.__name__), self.assertRaises(frappe.PermissionError):
					card()
			for doctype, names in (
				("Dashboard Chart", SOURCES),
				("Number Card", ("BTU Failure Rate Today", "BTU Fire Lag p95 Today", "BTU Runs Today")),
			):
				for name in names:
					self.assertFalse(
						frappe.has_permission(doctype, doc=name, user=user), f"{user} may read {doctype} {name}"
					)

	def test_a_btu_manager_sees_the_dashboard(self):
		log(self.task, MONDAY, fire_lag_ms=3)
		frappe.set_user(MANAGER)
		self.assertEqual(values(self.lag_chart())["max (ms)"], [3])
		for doctype, names in (
			("Dashboard Chart", SOURCES),
			("Number Card", ("BTU Failure Rate Today", "BTU Fire Lag p95 Today", "BTU Runs Today")),
		):
			for name in names:
				self.assertTrue(
					frappe.has_permission(doctype, doc=name, user=MANAGER), f"BTU Manager may not read {doctype} {name}"
				)
		self.assertIn("value", dashboard_cards.failure_rate_today())

	def test_a_btu_manager_without_read_on_task_logs_gets_nothing(self):
		"""The queries skip get_list, so they check the DocType's role permissions themselves (Role Permission
		Manager)."""
		log(self.task, MONDAY, fire_lag_ms=3, seconds=1)
		update_permission_property(run_stats.LOG, "BTU Manager", 0, "read", 0, validate=False)
		frappe.clear_cache(doctype=run_stats.LOG)
		frappe.set_user(MANAGER)
		for name, get in SOURCES.items():
			with self.subTest(chart=name), self.assertRaises(frappe.PermissionError) as caught:
				get(chart_name=name, **RANGE)
			self.assertIn(f"User {MANAGER} may not read BTU Task Logs", str(caught.exception))
		for card in CARDS:
			with self.subTest(card=card.__name__), self.assertRaises(frappe.PermissionError):
				card()
		with self.assertRaises(frappe.PermissionError):
			task_duration_averages.execute({"from_date": "2001-03-05", "to_date": "2001-03-05"})

	def test_a_refusal_is_one_sentence_a_translation_may_reorder(self):
		"""The user and the roles are placeholders of one translatable sentence per refusal, not fragments."""
		frappe.get_doc({"doctype": "Language", "language_code": LANGUAGE, "language_name": "BTU test"}).insert(
			ignore_permissions=True
		)
		translated = {
			"User {0} may not use BTU: this needs one of the roles {1} (ask a System Manager to add it in the user's "
			"Roles)": "[{1}] needed by {0} for BTU",
			"User {0} may not read BTU's metrics: this needs one of the roles {1} (ask a System Manager to add it in "
			"the user's Roles)": "[{1}] needed by {0} for metrics",
		}
		for source, text in translated.items():
			frappe.get_doc(
				{"doctype": "Translation", "language": LANGUAGE, "source_text": source, "translated_text": text}
			).insert(ignore_permissions=True)
		kept = frappe.local.lang
		frappe.set_user(PLAIN_USER)
		frappe.local.lang = LANGUAGE
		try:
			with self.assertRaises(frappe.PermissionError) as chart:
				lag.get(chart_name="BTU Fire Lag", **RANGE)
			with self.assertRaises(frappe.PermissionError) as scrape:
				metrics.scrape()
		finally:
			frappe.local.lang = kept
			clear_translation_cache()  # this test's translations, rolled back
		self.assertEqual(str(chart.exception), f"[System Manager, BTU Manager] needed by {PLAIN_USER} for BTU")
		self.assertEqual(
			str(scrape.exception),
			f"[System Manager, BTU Manager, BTU Metrics Reader] needed by {PLAIN_USER} for metrics",
		)


class TestFrappeRendersThem(IntegrationTestCase):
	"""BTU's Number Cards and Dashboard Charts through Frappe's own code, as the Desk asks for them (v16's query
	engine refuses filter forms v15's accepted: a lone 5-element condition)."""

	def test_every_card_and_chart_of_btu_evaluates(self):
		from frappe.desk.doctype.dashboard_chart.dashboard_chart import get as chart_data
		from frappe.desk.doctype.number_card.number_card import get_result

		cards = frappe.get_all("Number Card", filters={"module": "BTU Core"}, pluck="name")
		# A Custom chart's data is its source's method, which the Desk calls itself (TestDashboard covers each).
		charts = frappe.get_all(
			"Dashboard Chart", filters={"module": "BTU Core", "chart_type": ("!=", "Custom")}, pluck="name"
		)
		self.assertTrue(cards and charts)
		for name in cards:
			with self.subTest(card=name):
				card = frappe.get_doc("Number Card", name)
				if card.type == "Document Type":
					self.assertIsNotNone(get_result(card, card.filters_json))
		for name in charts:
			with self.subTest(chart=name):
				self.assertIsInstance(chart_data(chart_name=name, refresh=1), dict)

	def test_lags_and_durations_are_stored_to_the_microsecond(self):
		"""v16 makes a Float's column decimal(21, precision): a field precision would round sub-millisecond lags
		to 0, which the charts read as "not set"."""
		for field in ("fire_lag_ms", "execution_time"):
			column = frappe.db.sql(
				"select numeric_scale from information_schema.columns "
				"where table_schema = database() and table_name = 'tabBTU Task Log' and column_name = %s",
				field,
			)
			self.assertGreaterEqual(column[0][0], 6, field)


class TestDeskEntry(IntegrationTestCase):
	"""Frappe v16's workspace sidebar and desktop icon for BTU (v15 has neither; these tests skip there)."""

	def setUp(self):
		if not frappe.db.table_exists("Workspace Sidebar") or not frappe.db.table_exists("Desktop Icon"):
			self.skipTest("this Frappe has no Workspace Sidebar or Desktop Icon (v15)")

	def sidebar_links(self) -> list[tuple[str, str]]:
		name = frappe.db.get_value("Workspace Sidebar", {"title": install.WORKSPACE})
		self.assertTrue(name, "BTU's workspace sidebar")
		return [(item.link_type, item.link_to) for item in frappe.get_doc("Workspace Sidebar", name).items]

	def test_the_sidebar_links_the_dashboard_and_the_icon_opens_it(self):
		self.assertIn(("Dashboard", "BTU Dashboard"), self.sidebar_links())
		self.assertEqual(
			frappe.db.get_value("Desktop Icon", {"label": install.WORKSPACE, "icon_type": "Link"}, "link_to"),
			install.WORKSPACE,
		)

	def test_a_site_that_lost_them_gets_them_back_at_the_next_migrate(self):
		"""As on a site installed before BTU synced its dashboards early: no sidebar, no icon, until
		ensure_desk_entry."""
		frappe.db.delete(
			"Workspace Sidebar Item",
			{"parent": ("in", frappe.get_all("Workspace Sidebar", {"title": install.WORKSPACE}, pluck="name"))},
		)
		frappe.db.delete("Workspace Sidebar", {"title": install.WORKSPACE})
		frappe.db.delete("Desktop Icon", {"label": install.WORKSPACE, "icon_type": "Link"})
		frappe.db.commit()
		install.ensure_desk_entry()
		self.assertIn(("Dashboard", "BTU Dashboard"), self.sidebar_links())
		self.assertTrue(frappe.db.exists("Desktop Icon", {"label": install.WORKSPACE, "icon_type": "Link"}))
