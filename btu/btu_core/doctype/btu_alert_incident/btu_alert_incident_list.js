// Open incidents first, red; resolved ones green.
frappe.listview_settings["BTU Alert Incident"] = {
	filters: [["status", "=", "Open"]],
	get_indicator(doc) {
		return doc.status === "Open" ? [__("Open"), "red", "status,=,Open"] : [__("Resolved"), "green", "status,=,Resolved"];
	},
};
