frappe.query_reports["Task Duration Averages"] = {
	filters: [
		{ fieldname: "from_date", label: __("From"), fieldtype: "Date", default: frappe.datetime.add_days(frappe.datetime.get_today(), -30), reqd: 1 },
		{ fieldname: "to_date", label: __("To"), fieldtype: "Date", default: frappe.datetime.get_today(), reqd: 1 },
		{ fieldname: "task", label: __("Task"), fieldtype: "Link", options: "BTU Task" },
		{ fieldname: "status", label: __("Status"), fieldtype: "Select", options: "Succeeded\nFailed\nTimed Out", default: "Succeeded" },
	],
};
