frappe.provide("frappe.dashboards.chart_sources");

frappe.dashboards.chart_sources["BTU Duration Percentiles"] = {
	method: "btu.btu_core.dashboard_chart_source.btu_duration_percentiles.btu_duration_percentiles.get",
	filters: [
		{
			fieldname: "timespan",
			label: __("Period"),
			fieldtype: "Select",
			options: [
				{ value: "Last Week", label: __("Last Week") },
				{ value: "Last Month", label: __("Last Month") },
				{ value: "Last Quarter", label: __("Last Quarter") },
				{ value: "Last Year", label: __("Last Year") },
			],
			default: "Last Week",
			reqd: 1,
		},
		{
			fieldname: "status",
			label: __("Status"),
			fieldtype: "Select",
			options: [
				{ value: "Succeeded", label: __("Succeeded") },
				{ value: "Failed", label: __("Failed") },
				{ value: "Timed Out", label: __("Timed Out") },
			],
			default: "Succeeded",
			reqd: 1,
		},
		{ fieldname: "task", label: __("Task"), fieldtype: "Link", options: "BTU Task" },
	],
};
