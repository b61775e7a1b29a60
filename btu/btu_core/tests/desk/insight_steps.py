"""What the person reads on the Dashboard's cards and charts and in the reports (test_desk_workspace.py,
test_desk_reports.py)."""

from __future__ import annotations

import time

from btu.btu_core.tests.desk.browser import DeskBrowser
from btu.btu_core.tests.utils import patient

# -- the workspace, the Dashboard and reports ----------------------------------------------------------------------

# frappe-charts' entry: 0.7 s on a figure of zeros, then 0.35 s of animation and 0.4 s until it redraws the figure.
SETTLE_SECONDS = 1.5

# Each number card: its title and the number it shows (or "" while loading).
CARDS_JS = """
return Array.from(document.querySelectorAll('.widget.number-widget-box')).filter((w) => w.offsetParent).map((w) => [
	(w.querySelector('.widget-title') || {}).textContent.trim(),
	((w.querySelector('.number') || {}).textContent || '').trim(),
]);
"""

# Each chart: its title, and what it shows: still loading, "No Data", or its figure (axes' labels, legends and whether
# each fits inside the figure, the bars and lines drawn).
CHARTS_JS = """
const shown = (e) => !!e && e.getClientRects().length > 0;
return Array.from(document.querySelectorAll('.widget.dashboard-widget-box')).filter(shown).map((w) => {
	const svg = w.querySelector('svg.frappe-chart');
	const states = Array.from(w.querySelectorAll('.chart-loading-state')).filter(shown)
		.map((e) => e.textContent.trim());
	const chart = { title: w.querySelector('.widget-title').textContent.trim(), states, drawn: shown(svg) };
	if (!chart.drawn) return chart;
	const box = svg.getBoundingClientRect();
	const texts = (selector) => Array.from(svg.querySelectorAll(selector)).map((t) => t.textContent.trim());
	chart.y = texts('.y.axis text');
	chart.x = texts('.x.axis text');
	chart.legends = Array.from(svg.querySelectorAll('.legend-dataset-label')).map((t) => {
		const r = t.getBoundingClientRect();
		return [t.textContent.trim(), r.left >= box.left - 1 && r.right <= box.right + 1];
	});
	chart.bars = svg.querySelectorAll('.dataset-units rect').length;
	chart.lines = svg.querySelectorAll('.dataset-units path.line-graph-path').length;
	return chart;
});
"""


# The report's chart as drawn (None without one): its texts and shapes.
REPORT_CHART_JS = """
const svg = Array.from(document.querySelectorAll('.chart-wrapper svg.frappe-chart'))
	.find((s) => s.getClientRects().length > 0);
if (!svg) return null;
return [svg.textContent, svg.querySelectorAll('rect, path, circle').length, svg.innerHTML.length];
"""


def cards(browser: DeskBrowser, titles: tuple[str, ...]) -> dict[str, str]:
	"""The number each card shows, once all of `titles` have loaded."""

	def loaded():
		found = {title.casefold(): number for title, number in browser.driver.execute_script(CARDS_JS)}
		numbers = {title: found.get(title.casefold()) for title in titles}
		return numbers if all(number and number != "Loading..." for number in numbers.values()) else None

	return browser.wait(loaded, f"the cards {titles}")


def settled(browser: DeskBrowser, read, what: str):
	"""read()'s answer once truthy and the same for SETTLE_SECONDS: a chart that stopped moving (frappe-charts draws
	a figure of zeros first, then animates to the data)."""
	last, since = None, 0.0

	def still():
		nonlocal last, since
		now = read()
		if now != last:
			last, since = now, time.monotonic()
			return None
		return now if now and time.monotonic() - since >= patient(SETTLE_SECONDS) else None

	return browser.wait(still, what)


def charts(browser: DeskBrowser, titles: tuple[str, ...]) -> dict[str, dict]:
	"""What each chart of `titles` shows once drawn: "No Data", or its figure once it stopped moving."""

	def drawn():
		found = {chart["title"]: chart for chart in browser.driver.execute_script(CHARTS_JS)}
		if not all(title in found for title in titles):
			return None
		for title in titles:
			chart = found[title]
			if "Loading..." in chart["states"] or not (chart["drawn"] or "No Data" in chart["states"]):
				return None
		return {title: found[title] for title in titles}

	return settled(browser, drawn, f"the charts {titles} drawn")


def report_table(browser: DeskBrowser) -> tuple[list[str], list[list[str]]]:
	"""The report's table as the person sees it: its column headings and each row's cells (the row number left
	out)."""
	return browser.driver.execute_script(
		"const cells = (row) => Array.from(row.querySelectorAll('.dt-cell__content')).slice(1)"
		"  .map((c) => c.textContent.trim());"
		"const header = document.querySelector('.dt-row-header');"
		"const rows = document.querySelectorAll('.dt-scrollable .dt-row:not(.dt-row-header):not(.dt-row-filter)');"
		"return [header ? cells(header) : [], Array.from(rows).map(cells)];"
	)


def report_ready(browser: DeskBrowser, name: str) -> None:
	"""Until the report shows its table (or that it has none) and its chart, if any, stopped moving: a filter changed
	while Frappe still draws the chart makes frappe-charts fail ("removeChild ... not a child of this node")."""
	browser.wait(
		lambda: browser.driver.execute_script(
			"return window.frappe && frappe.query_report && frappe.query_report.report_name === arguments[0]"
			" && !!document.querySelector('.dt-scrollable, .no-result:not(.hidden)')",
			name,
		),
		f"the report {name}",
	)
	browser.wait_for_idle()
	settled(browser, lambda: browser.driver.execute_script(REPORT_CHART_JS) or "none", f"the chart of {name}")
