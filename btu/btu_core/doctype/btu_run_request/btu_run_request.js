// BTU Run Request: a retry, backfilled slot or chained run; read-only but for Cancel.
frappe.ui.form.on("BTU Run Request", {
	refresh(frm) {
		if (["Pending", "Waiting"].includes(frm.doc.status)) {
			frm.add_custom_button(__("Cancel Run"), () =>
				frappe
					.call({ method: "btu.btu_core.api.cancel_run_request", args: { request: frm.doc.name } })
					.then(() => frm.reload_doc())
			);
		}
	},
});
