frappe.provide("frappe.dashboards.chart_sources");

frappe.dashboards.chart_sources["BTU Runs by Status"] = {
	method: "btu.btu_core.dashboard_chart_source.btu_runs_by_status.btu_runs_by_status.get",
	filters: [{ fieldname: "task", label: __("Task"), fieldtype: "Link", options: "BTU Task" }],
};
