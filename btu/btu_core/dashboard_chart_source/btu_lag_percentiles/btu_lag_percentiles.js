frappe.provide("frappe.dashboards.chart_sources");

frappe.dashboards.chart_sources["BTU Lag Percentiles"] = {
	method: "btu.btu_core.dashboard_chart_source.btu_lag_percentiles.btu_lag_percentiles.get",
	filters: [
		{
			fieldname: "measure",
			label: __("Measure"),
			fieldtype: "Select",
			options: [
				{ value: "Fire Lag", label: __("Fire Lag (slot to enqueue)") },
				{ value: "Start Lag", label: __("Start Lag (slot to start)") },
			],
			default: "Fire Lag",
			reqd: 1,
		},
		{ fieldname: "task", label: __("Task"), fieldtype: "Link", options: "BTU Task" },
	],
};
