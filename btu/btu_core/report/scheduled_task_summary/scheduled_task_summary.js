frappe.query_reports["Scheduled Task Summary"] = {
	filters: [
		{ fieldname: "enabled_only", label: __("Enabled Only"), fieldtype: "Check", default: 1 },
		{ fieldname: "task", label: __("Task"), fieldtype: "Link", options: "BTU Task" },
	],
};
