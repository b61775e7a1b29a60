frappe.provide("frappe.dashboards.chart_sources");

frappe.dashboards.chart_sources["BTU Failure Rate"] = {
	method: "btu.btu_core.dashboard_chart_source.btu_failure_rate.btu_failure_rate.get",
	filters: [{ fieldname: "task", label: __("Task"), fieldtype: "Link", options: "BTU Task" }],
};
