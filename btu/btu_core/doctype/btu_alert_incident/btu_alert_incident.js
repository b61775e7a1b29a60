// BTU Alert Incident form: resolve an open incident by hand (the next occurrence opens a new one and alerts again).

frappe.ui.form.on("BTU Alert Incident", {
	refresh(frm) {
		if (frm.doc.status !== "Open") return;
		frm.add_custom_button(__("Resolve"), () => {
			frappe.prompt(
				{ fieldname: "note", fieldtype: "Small Text", label: __("Note") },
				({ note }) =>
					frappe
						.call({ method: "btu.btu_core.api.resolve_incident", args: { incident: frm.doc.name, note } })
						.then(() => frm.reload_doc()),
				__("Resolve {0}", [frappe.utils.escape_html(frm.doc.name)]),
				__("Resolve")
			);
		});
	},
});
