// BTU Task Log list: one indicator per status; a run "Started" over 10 minutes ago shows orange.

const BTU_LONG_RUN_MINUTES = 10;

frappe.listview_settings["BTU Task Log"] = {
	add_fields: ["status", "date_time_started"],
	has_indicator_for_draft: true,
	get_indicator(doc) {
		switch (doc.status) {
			case "Succeeded":
				return [__("Succeeded"), "green", "status,=,Succeeded"];
			case "Failed":
				return [__("Failed"), "red", "status,=,Failed"];
			case "Timed Out":
				return [__("Timed Out"), "red", "status,=,Timed Out"];
			case "Skipped":
				return [__("Skipped"), "gray", "status,=,Skipped"];
			case "Started": {
				const started = doc.date_time_started ? frappe.datetime.str_to_obj(doc.date_time_started) : null;
				const minutes = started ? (frappe.datetime.str_to_obj(frappe.datetime.now_datetime()) - started) / 60000 : 0;
				return minutes > BTU_LONG_RUN_MINUTES
					? [__("Started (long)"), "orange", "status,=,Started"]
					: [__("Started"), "blue", "status,=,Started"];
			}
		}
	},
};
