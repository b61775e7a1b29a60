"""docs/grafana/btu-dashboard.json: it loads as a Grafana dashboard, and it queries what BTU exports, all of it.

No Grafana runs here. The dashboard is checked three ways: its structure (what Grafana needs to import
and draw it), the keys Grafana's own schema knows (grafana-foundation-sdk's models, generated from it),
and every PromQL query against the metrics BTU's code exports: a real scheduler's registry (the engine's
`Scheduler`, over a private redis-server) and the Frappe side's task-outcome collector, each made to
produce a sample of every family. Renaming a metric or a label in the code, or in the dashboard, fails here.
"""

from __future__ import annotations

import ast
import copy
import gc
import json
import re
import sys
import time
from collections import defaultdict
from pathlib import Path

import pytest
from prometheus_client import CollectorRegistry

from btu.btu_core.insights import task_outcomes
from btu.scheduler_daemon.leading.engine import Scheduler
from btu.scheduler_daemon.leading.planner import Plan, Unplanned
from btu.scheduler_daemon.operations.config import Config
from btu.scheduler_daemon.store.fires import FireItem
from btu.scheduler_daemon.store.outcomes import FireOutcome, ItemOutcome, JobOutcome
from btu.scheduler_daemon.store.state import ItemResult, Released
from btu.shared import protocol
from tests.engine.test_metrics import released
from tests.support.keys import KEYS

pytestmark = pytest.mark.versions

DASHBOARD = Path(__file__).resolve().parents[2] / "docs" / "grafana" / "btu-dashboard.json"
DATASOURCE = {"type": "prometheus", "uid": "${datasource}"}
SITE = "site1.localhost"
NAMED_SCHEDULE = "TS-1"
# Grafana's unit ids this dashboard uses: a new one goes here once checked against Grafana's unit list.
UNITS = {"s", "ops", "opm", "percentunit", "bytes", "short", "none"}
# BTU families no panel shows, each with why. Empty: every family has one.
NOT_ON_THE_DASHBOARD: dict[str, str] = {}

# PromQL's aggregations and functions (Prometheus 2.x and 3.x).
FUNCTIONS = frozenset(
	"""
	sum min max avg group stddev stdvar count count_values bottomk topk quantile limitk limit_ratio
	abs absent absent_over_time ceil changes clamp clamp_max clamp_min day_of_month day_of_week day_of_year
	days_in_month delta deriv exp floor histogram_avg histogram_count histogram_fraction histogram_quantile
	histogram_stddev histogram_stdvar histogram_sum double_exponential_smoothing holt_winters hour idelta
	increase irate label_join label_replace ln log2 log10 minute month predict_linear rate resets round scalar
	sgn sort sort_desc sort_by_label sort_by_label_desc sqrt time timestamp vector year avg_over_time
	min_over_time max_over_time sum_over_time count_over_time quantile_over_time stddev_over_time
	stdvar_over_time last_over_time present_over_time mad_over_time acos acosh asin asinh atan atanh cos cosh
	sin sinh tan tanh deg rad pi
""".split()
)
# Followed by a parenthesised list of label names.
LABEL_CLAUSES = frozenset(["by", "without", "on", "ignoring", "group_left", "group_right"])
KEYWORDS = frozenset(["offset", "bool", "and", "or", "unless", "atan2", "inf", "nan"])
# Prometheus adds these to every series of a scrape target.
TARGET_LABELS = frozenset(["instance", "job"])

TOKEN = re.compile(
	r"""
	(?P<string>"(?:[^"\\]|\\.)*"|'(?:[^'\\]|\\.)*'|`[^`]*`)
	|(?P<variable>\$\{[^}]*\}|\$\w+|\[\[\w+(?::\w+)?\]\])
	|(?P<duration>\d+(?:ms|[smhdwy])(?:\d+(?:ms|[smhdwy]))*(?![\w.]))
	|(?P<number>(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?)
	|(?P<name>[A-Za-z_][A-Za-z0-9_:]*)
	|(?P<op>=~|!~|!=|==|>=|<=|[-+*/%^=<>{}()\[\],:@])
	|(?P<space>\s+)
	""",
	re.VERBOSE,
)
VARIABLE = re.compile(r"\$\{(\w+)(?::[^}]*)?\}|\$(\w+)|\[\[(\w+)(?::\w+)?\]\]")
CLOSING = {")": "(", "]": "[", "}": "{"}
LEGEND_LABEL = re.compile(r"\{\{\s*(\w+)\s*\}\}")
LABEL_VALUES = re.compile(r"^label_values\((?:(?P<selector>.+),\s*)?(?P<label>\w+)\)$")


# -- PromQL, as far as the checks need it ----------------------------------------------------------


class Query:
	"""What one PromQL expression refers to: metric names, label names (per metric, and in by/on clauses), literal
	matcher values."""

	def __init__(self, expr: str):
		self.expr = expr
		self.metrics: set[str] = set()
		self.functions: set[str] = set()
		self.clause_labels: set[str] = set()
		self.matchers: list[tuple[str | None, str, str, str]] = []  # (metric or None, label, op, value)
		self.tokens = tokenize(expr)
		self.parse()

	def parse(self) -> None:
		tokens, i, brackets = self.tokens, 0, 0
		while i < len(tokens):
			kind, text = tokens[i]
			after = tokens[i + 1][1] if i + 1 < len(tokens) else ""
			if text == "[":
				brackets += 1
			elif text == "]":
				brackets -= 1
			elif text == "{":
				i = self.read_matchers(i + 1, None)
			elif kind == "name" and brackets:
				raise ValueError(f"{self.expr!r}: {text!r} inside [...], where only a duration belongs")
			elif kind == "name" and text in LABEL_CLAUSES and after == "(":
				i = self.read_labels(i + 2)
			elif kind == "name" and (after == "(" or (text in FUNCTIONS and after in ("by", "without"))):
				self.functions.add(text)
			elif kind == "name" and text.lower() not in KEYWORDS and text not in LABEL_CLAUSES:
				self.metrics.add(text)
				if after == "{":
					i = self.read_matchers(i + 2, text)
			i += 1

	def read_labels(self, i: int) -> int:
		while self.tokens[i][1] != ")":
			if self.tokens[i][0] == "name":
				self.clause_labels.add(self.tokens[i][1])
			i += 1
		return i

	def read_matchers(self, i: int, metric: str | None) -> int:
		"""From after "{" to its "}": each `label op "value"`; a __name__ matcher names metrics too."""
		while self.tokens[i][1] != "}":
			if self.tokens[i][1] == ",":
				i += 1
				continue
			(_, label), (_, op), (kind, quoted) = self.tokens[i : i + 3]
			if op not in ("=", "!=", "=~", "!~") or kind != "string":
				raise ValueError(
					f"{self.expr!r}: {label}{op}{quoted} is no label matcher (label, =, !=, =~ or !~, a quoted value)"
				)
			value = quoted[1:-1]
			self.matchers.append((metric, label, op, value))
			if label == "__name__" and op in ("=", "=~"):
				self.metrics.update(alternatives(value, self.expr))
			i += 3
		return i


def tokenize(expr: str) -> list[tuple[str, str]]:
	tokens, at = [], 0
	while at < len(expr):
		found = TOKEN.match(expr, at)
		if not found:
			raise ValueError(f"{expr!r}: cannot read PromQL at {expr[at : at + 20]!r}")
		if found.lastgroup != "space":
			tokens.append((found.lastgroup, found.group()))
		at = found.end()
	open_ = []
	for _, text in tokens:
		if text in ("(", "[", "{"):
			open_.append(text)
		elif text in CLOSING and (not open_ or open_.pop() != CLOSING[text]):
			raise ValueError(f"{expr!r}: {text} closes nothing")
	if open_:
		raise ValueError(f"{expr!r}: {open_[-1]} is never closed")
	return tokens


def alternatives(value: str, expr: str) -> list[str]:
	parts = value.split("|")
	if not all(re.fullmatch(r"\w+", part) for part in parts):
		raise ValueError(f"{expr!r}: write {value!r} as plain names joined by |, so the names can be checked")
	return parts


def variables(text: str) -> set[str]:
	return {next(filter(None, found.groups())) for found in VARIABLE.finditer(text)}


# -- the dashboard ---------------------------------------------------------------------------------


def load() -> dict:
	return json.loads(DASHBOARD.read_text())


def all_panels(dashboard: dict) -> list[dict]:
	"""Every panel, those inside collapsed rows too."""
	return [p for top in dashboard["panels"] for p in (top, *top.get("panels", ()))]


def queries(dashboard: dict) -> list[tuple[str, str, str]]:
	"""(where, expr, legend) of every target and of every query variable's selector."""
	found = []
	for panel in all_panels(dashboard):
		for target in panel.get("targets", ()):
			found.append(
				(
					f"panel {panel['title']!r} {target.get('refId')}",
					target.get("expr", ""),
					target.get("legendFormat", ""),
				)
			)
	for variable in dashboard["templating"]["list"]:
		if variable["type"] == "query":
			selector = LABEL_VALUES.match(variable["query"])
			if selector and selector["selector"]:
				found.append((f"variable {variable['name']}", selector["selector"], f"{{{{{selector['label']}}}}}"))
	return found


def structure_problems(dashboard: dict) -> list[str]:
	problems = []
	for key, kind in (("title", str), ("uid", str), ("schemaVersion", int), ("panels", list), ("templating", dict)):
		if not isinstance(dashboard.get(key), kind):
			problems.append(f"dashboard: {key} must be a {kind.__name__}")
	ids = [panel.get("id") for panel in all_panels(dashboard)]
	problems += [f"panel id {i} used twice" for i in sorted({i for i in ids if ids.count(i) > 1})]
	for panel in all_panels(dashboard):
		problems += panel_problems(panel)
	problems += overlaps(dashboard["panels"])
	return problems + templating_problems(dashboard)


def panel_problems(panel: dict) -> list[str]:
	where = f"panel {panel.get('id')} {panel.get('title')!r}"
	problems = []
	if not isinstance(panel.get("id"), int) or not panel.get("type") or not panel.get("title"):
		problems.append(f"{where}: needs an integer id, a type and a title")
	pos = panel.get("gridPos") or {}
	if (
		not all(isinstance(pos.get(k), int) for k in "hwxy")
		or pos["w"] < 1
		or pos["h"] < 1
		or pos["x"] < 0
		or pos["x"] + pos["w"] > 24
	):
		problems.append(f"{where}: gridPos {pos} must be whole h, w, x, y within Grafana's 24 columns")
	if panel.get("type") == "row":
		return problems
	if not panel.get("description"):
		problems.append(f"{where}: say in a description what it shows and what to do when it looks bad")
	if panel.get("datasource") != DATASOURCE:
		problems.append(f"{where}: datasource must be {DATASOURCE} (the dashboard's datasource variable)")
	unit = panel.get("fieldConfig", {}).get("defaults", {}).get("unit")
	if panel["type"] in ("timeseries", "stat", "bargauge") and unit not in UNITS:
		problems.append(f"{where}: unit {unit!r} is not one of Grafana's ids {sorted(UNITS)}")
	targets = panel.get("targets") or []
	if not targets:
		problems.append(f"{where}: no targets")
	refs = [target.get("refId") for target in targets]
	if len(set(refs)) != len(refs) or not all(refs):
		problems.append(f"{where}: refIds {refs} must be present and unique")
	for target in targets:
		if not target.get("expr", "").strip():
			problems.append(f"{where} {target.get('refId')}: no expr")
		if target.get("datasource", DATASOURCE) != DATASOURCE:
			problems.append(f"{where} {target.get('refId')}: datasource must be {DATASOURCE}")
	return problems


def overlaps(panels: list[dict]) -> list[str]:
	cells: dict[tuple[int, int], str] = {}
	problems = []
	for panel in panels:
		pos = panel.get("gridPos") or {}
		for x in range(pos.get("x", 0), pos.get("x", 0) + pos.get("w", 0)):
			for y in range(pos.get("y", 0), pos.get("y", 0) + pos.get("h", 0)):
				if (x, y) in cells:
					problems.append(f"panel {panel['title']!r} overlaps {cells[x, y]!r} at x={x} y={y}")
					break
				cells[x, y] = panel["title"]
			else:
				continue
			break
	return problems


def templating_problems(dashboard: dict) -> list[str]:
	listed = dashboard["templating"]["list"]
	names = [v.get("name") for v in listed]
	problems = [f"variable {n} defined twice" for n in sorted({n for n in names if names.count(n) > 1})]
	sources = [v for v in listed if v.get("type") == "datasource"]
	if [(v["name"], v.get("query")) for v in sources] != [("datasource", "prometheus")]:
		problems.append("templating: needs one variable `datasource` of type datasource with query prometheus")
	for variable in listed:
		if variable.get("type") != "query":
			continue
		if variable.get("datasource") != DATASOURCE or not LABEL_VALUES.match(variable.get("query", "")):
			problems.append(f"variable {variable['name']}: a label_values(...) query on {DATASOURCE}")
		if not variable.get("includeAll"):
			problems.append(f"variable {variable['name']}: offer All (includeAll)")
	texts = [expr for _, expr, _ in queries(dashboard)] + [v.get("query", "") for v in listed]
	for name in sorted(set().union(*map(variables, texts)) - set(names)):
		if not name.startswith("__"):  # Grafana's own: $__rate_interval, $__range, ...
			problems.append(f"${name} is used but no templating variable defines it")
	return problems


# -- what BTU exports ------------------------------------------------------------------------------


def scheduler_registry(tmp_path: Path, redis_url: str, r) -> CollectorRegistry:
	"""The registry a scheduler process serves (the engine's own), with a sample in every family."""
	(tmp_path / "sites").mkdir()
	(tmp_path / "sites" / "common_site_config.json").write_text(json.dumps({"redis_queue": redis_url}))
	# A site of this bench: a scrape reads the state of the bench's own sites only.
	(tmp_path / "sites" / SITE).mkdir()
	(tmp_path / "sites" / SITE / "site_config.json").write_text("{}")
	scheduler = Scheduler(
		Config(redis_url=redis_url, bench=str(tmp_path), metrics_schedules=(NAMED_SCHEDULE,)), tmp_path
	)
	r.sadd(KEYS.sites, SITE)
	r.sadd(KEYS.site_schedules_key(SITE), NAMED_SCHEDULE)
	r.hset(KEYS.invalid_rows_key(SITE), "TS-2", "a bad cron")
	metrics = scheduler.metrics
	metrics.led(7)
	metrics.stopped_leading("lease_lost")
	metrics.renewed(True)
	metrics.renewed(False)
	outcomes = (
		FireOutcome.ENQUEUED,
		FireOutcome.SKIPPED_OVERLAP,
		FireOutcome.SKIPPED_CONCURRENCY,
		FireOutcome.RETURNED,
		FireOutcome.PUSH_REFUSED,
	)
	metrics.released(
		[released(SITE, NAMED_SCHEDULE, 3, outcome) for outcome in outcomes]
		+ [Released(b"not a member", FireOutcome.QUARANTINED, 0)]
	)
	metrics.planned(Plan(failed=[Unplanned(SITE, "TS-2", "its spec raised")]))
	item = FireItem(SITE, NAMED_SCHEDULE, "", "", "", False, skipped=1, expired=1, jobs=[], skipped_by_request=[0])
	metrics.prepared(
		[item, item], [ItemResult(ItemOutcome.WRITTEN, [JobOutcome.DUPLICATE]), ItemResult(ItemOutcome.FAILED, [])]
	)
	metrics.database_error(SITE)
	metrics.rpc_command(protocol.REQUEST_TYPES[0], "accepted")
	with metrics.reconcile_timer("full"):
		pass
	return metrics.registry


def frappe_registry(r) -> CollectorRegistry:
	"""What the Frappe side's endpoint serves (btu.btu_core.insights.metrics.scrape), after a run of every status."""
	with r.pipeline(transaction=True) as pipe:
		for status in [*task_outcomes.STATUSES, "Cancelled"]:
			task_outcomes.record(pipe, KEYS, SITE, "Nightly report", status, 0.2, 0.01, time.time())
		pipe.execute()
	registry = CollectorRegistry()
	registry.register(task_outcomes.TaskOutcomes(lambda: r, KEYS, SITE))
	return registry


def exported(*registries: CollectorRegistry) -> dict[str, dict[str, dict[str, set[str]]]]:
	"""family -> sample name -> label -> values seen."""
	families: dict[str, dict] = {}
	for registry in registries:
		for family in registry.collect():
			samples = families.setdefault(family.name, {})
			for sample in family.samples:
				labels = samples.setdefault(sample.name, defaultdict(set))
				for label, value in sample.labels.items():
					labels[label].add(value)
	return families


@pytest.fixture
def families(tmp_path, redis_url, r):
	found = exported(scheduler_registry(tmp_path, redis_url, r), frappe_registry(r))
	gc.collect()  # the scheduler's clients (its objects refer to each other): closed now, not in a later test
	empty = sorted(name for name, samples in found.items() if not samples)
	assert not empty, (
		f"{empty}: exported with no sample here; "
		"make scheduler_registry/frappe_registry produce one, so its names and labels are checked"
	)
	return found


def query_problems(dashboard: dict, families: dict) -> list[str]:
	"""Every metric, label, matcher value and legend label a query names, against what the code exports."""
	samples = {name: labels for by_name in families.values() for name, labels in by_name.items()}
	problems = []
	for where, expr, legend in queries(dashboard):
		try:
			query = Query(expr)
		except (ValueError, IndexError) as exc:
			problems.append(f"{where}: {exc}")
			continue
		problems += [f"{where}: {f}() is no PromQL function" for f in sorted(query.functions - FUNCTIONS)]
		problems += [f"{where}: BTU exports no metric {m}" for m in sorted(query.metrics - samples.keys())]
		known = set(TARGET_LABELS | {"__name__"}).union(*(samples.get(m, {}) for m in query.metrics))
		used = query.clause_labels | set(LEGEND_LABEL.findall(legend))
		problems += [f"{where}: no metric it queries has a label {label}" for label in sorted(used - known)]
		for metric, label, op, value in query.matchers:
			problems += matcher_problems(where, samples.get(metric, {}) if metric else None, known, label, op, value)
	return problems


def matcher_problems(where: str, labels: dict | None, known: set[str], label: str, op: str, value: str) -> list[str]:
	if label == "__name__":
		return []
	if label not in (known if labels is None else set(labels) | TARGET_LABELS):
		return [f"{where}: matcher on {label}, a label the metric does not have"]
	literal = op in ("=", "=~") and "$" not in value and label in (labels or {}) and re.fullmatch(r"\w+(\|\w+)*", value)
	unseen = [v for v in value.split("|") if v not in labels[label]] if literal else []
	return [f"{where}: {label} is never {v!r} (seen: {sorted(labels[label])})" for v in unseen]


def coverage_problems(dashboard: dict, families: dict) -> list[str]:
	"""BTU families (both sides) that no query reads."""
	read = set()
	for _, expr, _ in queries(dashboard):
		read |= Query(expr).metrics
	return [
		f"{family}: BTU exports it and no panel shows it; add one (or list it in NOT_ON_THE_DASHBOARD with why)"
		for family, samples in sorted(families.items())
		if family.startswith("btu_") and family not in NOT_ON_THE_DASHBOARD and not read & samples.keys()
	]


# -- the tests -------------------------------------------------------------------------------------


def test_the_dashboard_has_what_grafana_needs_to_import_and_draw_it():
	dashboard = load()
	assert not structure_problems(dashboard), "\n".join(structure_problems(dashboard))
	assert len(all_panels(dashboard)) > 30


def test_every_query_names_metrics_and_labels_btu_exports(families):
	problems = query_problems(load(), families)
	assert not problems, "\n".join(problems)


def test_every_metric_btu_exports_has_a_panel(families):
	assert set(NOT_ON_THE_DASHBOARD) <= set(families), "NOT_ON_THE_DASHBOARD names a family BTU no longer exports"
	problems = coverage_problems(load(), families)
	assert not problems, "\n".join(problems)


def desk_finished() -> set[str]:
	"""The statuses the Desk's failure rate divides by (btu.btu_core.insights.run_stats.FINISHED, read from the
	source: it imports frappe)."""
	tree = ast.parse((DASHBOARD.parents[2] / "btu" / "btu_core" / "insights" / "run_stats.py").read_text())
	found = next(
		node.value
		for node in tree.body
		if isinstance(node, ast.Assign) and [t.id for t in node.targets] == ["FINISHED"]
	)
	return set(ast.literal_eval(found))


def runs_statuses(expr: str) -> set[str]:
	"""The statuses the one status matcher of btu_task_runs_total in `expr` selects."""
	matchers = [
		(op, value)
		for metric, label, op, value in Query(expr).matchers
		if metric == "btu_task_runs_total" and label == "status"
	]
	assert len(matchers) == 1 and matchers[0][0] == "=~", (
		f"{expr!r}: one status=~ matcher on btu_task_runs_total, got {matchers}"
	)
	return set(alternatives(matchers[0][1], expr))


def test_task_failure_ratios_divide_by_finished_runs_as_the_desk_does():
	"""Failed and timed out over succeeded, failed and timed out: skipped runs (and "other") are no finished runs."""
	finished = {task_outcomes.STATUSES[status] for status in desk_finished()}
	assert finished == {"succeeded", "failed", "timed_out"}
	panels = [panel for panel in all_panels(load()) if panel["title"] == "Task failure ratio"]
	assert len(panels) == 2
	for panel in panels:
		for target in panel["targets"]:
			numerator, denominator = target["expr"].split(" / ")
			assert runs_statuses(numerator) == {"failed", "timed_out"}, panel["id"]
			assert runs_statuses(denominator) == finished, panel["id"]


def test_a_renamed_metric_label_or_value_is_caught(families):
	"""The checks themselves: each break of a query, made on a copy, is reported."""
	text = DASHBOARD.read_text()
	for old, new, expected in (
		("btu_fires_total{", "btu_fire_total{", "BTU exports no metric btu_fire_total"),
		("sum by (site, queue)", "sum by (site, rq_queue)", "no metric it queries has a label rq_queue"),
		('status="succeeded"', 'status="Succeeded"', "status is never 'Succeeded'"),
		('outcome="lost"', 'result="lost"', "matcher on result"),
		("{{reason}}", "{{reasons}}", "label reasons"),
		("histogram_quantile(", "histogram_quantil(", "histogram_quantil() is no PromQL function"),
	):
		old, new = json.dumps(old)[1:-1], json.dumps(new)[1:-1]  # as the file spells them
		assert old in text, f"the dashboard no longer holds {old!r}: pick another example"
		problems = query_problems(json.loads(text.replace(old, new)), families)
		assert any(expected in p for p in problems), f"{old} -> {new} not caught: {problems}"
	bare = json.loads(text.replace("btu_quarantined_total", "btu_fires_total"))
	assert any(p.startswith("btu_quarantined:") for p in coverage_problems(bare, families))


def test_a_broken_layout_datasource_or_variable_is_caught():
	dashboard = load()
	breaks = {
		"overlaps": lambda d: d["panels"][2]["gridPos"].update(x=d["panels"][1]["gridPos"]["x"]),
		"datasource must be": lambda d: d["panels"][1].update(datasource={"type": "prometheus", "uid": "prom-1"}),
		"$nosuch is used": lambda d: d["panels"][1]["targets"][0].update(expr='btu_fires_total{site=~"$nosuch"}'),
		"refIds": lambda d: d["panels"][1].update(targets=d["panels"][1]["targets"] * 2),
		"used twice": lambda d: d["panels"][2].update(id=d["panels"][1]["id"]),
		"24 columns": lambda d: d["panels"][1]["gridPos"].update(x=20, w=8),
		"unit": lambda d: d["panels"][1]["fieldConfig"]["defaults"].update(unit="ops/s"),
	}
	for expected, damage in breaks.items():
		broken = copy.deepcopy(dashboard)
		damage(broken)
		assert any(expected in p for p in structure_problems(broken)), f"{expected}: {structure_problems(broken)}"


def test_the_promql_reader_finds_names_not_strings_functions_or_keywords():
	query = Query(
		"histogram_quantile(0.99, sum by (site, le) "
		'(rate(btu_fire_lag_seconds_bucket{site=~"$site", queue!="x"}[$__rate_interval])))'
		" / on (instance) group_left () max without (job) (up offset 5m) > bool 1"
		' or label_replace(vector(1), "dst", "btu_not_a_metric", "src", "(.*)")'
		' or changes(max(btu_scheduler_lease_epoch)[1h:1m]) or {__name__=~"btu_a|btu_b"}'
	)
	assert query.metrics == {"btu_fire_lag_seconds_bucket", "up", "btu_scheduler_lease_epoch", "btu_a", "btu_b"}
	assert query.clause_labels == {"site", "le", "instance", "job"}
	assert {m[:3] for m in query.matchers} == {
		("btu_fire_lag_seconds_bucket", "site", "=~"),
		("btu_fire_lag_seconds_bucket", "queue", "!="),
		(None, "__name__", "=~"),
	}
	assert query.functions == {"histogram_quantile", "sum", "rate", "max", "label_replace", "vector", "changes"}
	for bad in ("rate(x[5m] + y", "x{site=~$site}", "x[5m offset]", "x ; y", '{__name__=~"btu_.*"}'):
		with pytest.raises((ValueError, IndexError)):
			Query(bad)


def test_grafana_schema_knows_every_key():
	"""grafana-foundation-sdk's models (generated from Grafana 11.6's schema) decode the dashboard and encode it again:
	a key the schema does not know (a typo, a key of another panel type) is dropped, and reported here."""
	if sys.version_info < (3, 11):
		pytest.skip("grafana-foundation-sdk needs Python 3.11+")
	try:
		from grafana_foundation_sdk.cog import plugins
		from grafana_foundation_sdk.cog.encoder import JSONEncoder
		from grafana_foundation_sdk.models.dashboard import Dashboard
	except ImportError:
		pytest.fail(
			"grafana-foundation-sdk is missing: scripts/venv installs it "
			"(pip install 'grafana-foundation-sdk==1769699379!11.6.0')"
		)
	plugins.register_default_plugins()
	dashboard = load()
	again = json.loads(json.dumps(Dashboard.from_json(dashboard), cls=JSONEncoder))
	lost = [
		path for path in dropped(dashboard, again, "") if not re.fullmatch(r"templating\.list\[\d+\]\.definition", path)
	]
	assert not lost, f"keys Grafana's schema does not know: {lost}"
	assert dropped({"panels": [{"type": "timeseries", "gridpos": {}}]}, {"panels": [{"type": "timeseries"}]}, "") == [
		"panels[0].gridpos"
	]


def dropped(before, after, path: str) -> list[str]:
	"""Paths of `before` that `after` lost or changed. The one key the SDK's schema lacks, a query variable's
	`definition` (the text Grafana's variable list shows), is the caller's to allow."""
	if isinstance(before, dict) and isinstance(after, dict):
		return [
			p
			for key, value in before.items()
			for p in (
				dropped(value, after[key], f"{path}.{key}".lstrip("."))
				if key in after
				else [f"{path}.{key}".lstrip(".")]
			)
		]
	if isinstance(before, list) and isinstance(after, list) and len(before) == len(after):
		return [p for n, (a, b) in enumerate(zip(before, after)) for p in dropped(a, b, f"{path}[{n}]")]
	return [] if before == after else [path]
