frappe.listview_settings["BTU Run Request"] = {
	get_indicator(doc) {
		const colour = { Pending: "blue", Waiting: "orange", Done: "green", Cancelled: "gray" }[doc.status] || "gray";
		return [__(doc.status), colour, "status,=," + doc.status];
	},
};
