// BTU Task form: run now (web server or worker), run once at a time, schedules and logs.
// Alerts, dialogs and freeze messages render HTML: every value put into them is escaped.

frappe.ui.form.on("BTU Task", {
	refresh(frm) {
		btu_declared(frm);
		if (frm.is_new()) {
			btu_who_creates_tasks(frm);
			return;
		}
		const run = __("Run");
		if (!frm.doc.run_only_as_worker) {
			frm.add_custom_button(__("Run on Web Server"), () => btu_run_on_webserver(frm), run);
		}
		frm.add_custom_button(__("Run via Worker"), () => btu_run_via_worker(frm), run);
		frm.add_custom_button(__("Run Once At..."), () => btu_run_once_at(frm), run);
		frm.add_custom_button(__("New Schedule"), () => frappe.new_doc("BTU Task Schedule", { task: frm.doc.name }));
		frm.add_custom_button(__("View Logs"), () => frappe.set_route("List", "BTU Task Log", { task: frm.doc.name }));
		frm.add_custom_button(__("Pending Runs"), () =>
			frappe.set_route("List", "BTU Run Request", { task: frm.doc.name, status: ["in", ["Pending", "Waiting"]] })
		);
		btu_alert_buttons(frm, { task: frm.doc.name });
	},
});

// A Task an app declares in hooks.py: its fields the server names (onload) are read-only, the intro says where to edit them.
// (As in btu_task_schedule.js: form scripts share no module.)
function btu_declared(frm) {
	const declared = (frm.doc.__onload || {}).btu_declared;
	if (!declared) return;
	frm.set_intro(frappe.utils.escape_html(declared.intro), "blue");
	for (const field of declared.fields) frm.set_df_property(field, "read_only", 1);
}

// A Task names code to run, so only a System Manager creates one (docs/SECURITY.md): anyone else opening a new Task
// (a link, a typed route) is told so before filling in a form they could not save.
function btu_who_creates_tasks(frm) {
	if (frappe.model.can_create("BTU Task")) return;
	frm.set_intro(
		__("Only a System Manager creates BTU Tasks, since a Task chooses the code that runs. Ask one to create it, then schedule and run it here."),
		"orange"
	);
	frm.disable_save();
	frm.set_read_only();
	frm.refresh_fields();
}

// Alerts: the open incidents, and a test message on one rule's channels (email, Desk notification, webhook).
function btu_alert_buttons(frm, filters) {
	const group = __("Alerts");
	frm.add_custom_button(__("Incidents"), () => frappe.set_route("List", "BTU Alert Incident", filters), group);
	if (!(frm.doc.alert_rules || []).length) return;
	frm.add_custom_button(__("Test an Alert Rule..."), () => {
		const rows = frm.doc.alert_rules.map((row) => ({ value: row.name, label: `${row.idx}: ${__(row.event)}` }));
		frappe.prompt(
			{ fieldname: "rule", fieldtype: "Select", label: __("Rule"), options: rows, reqd: 1, default: rows[0].value },
			({ rule }) =>
				frappe
					.call({ method: "btu.btu_core.api.test_alert", args: { doctype: frm.doctype, name: frm.doc.name, rule } })
					.then(({ message }) => {
						// One line per channel: an address both mailed and notified in the Desk is named on each.
						const listed = (names) => frappe.utils.escape_html(names.join(", "));
						const lines = [];
						if (message.emails.length) lines.push(__("Email sent to: {0}", [listed(message.emails)]));
						if (message.users.length) lines.push(__("Desk notification sent to: {0}", [listed(message.users)]));
						if (message.webhook) lines.push(__("Webhook called: {0}", [listed([message.webhook])]));
						if (!lines.length) lines.push(__("Sent to nobody."));
						lines.push(...message.errors.map((error) => frappe.utils.escape_html(error)));
						frappe.msgprint(lines.join("<br>"), message.errors.length ? __("Test alert: some failed") : __("Test alert sent"));
					}),
			__("Test an Alert Rule"),
			__("Send")
		);
	}, group);
}

function btu_log_link(name) {
	return `<a href="/app/btu-task-log/${encodeURIComponent(name)}">${frappe.utils.escape_html(name)}</a>`;
}

function btu_run_on_webserver(frm) {
	const seconds = frm.doc.max_task_duration || 0;
	const warning =
		seconds > 60 || !seconds
			? __("This Task may run for up to {0} seconds. A web request is cut by the web server's own timeout (gunicorn: 120 s by default) and holds a web worker while it runs; long tasks belong on a worker.", [frappe.utils.escape_html(String(seconds || "?"))])
			: __("The task runs inside this web request; the page waits until it ends.");
	frappe.confirm(`${warning}<br><br>${__("Run {0} on the web server now?", [frappe.utils.escape_html(frm.doc.desc_short)])}`, () => {
		frappe
			.call({
				method: "btu.btu_core.api.run_task_now",
				args: { task: frm.doc.name, on: "webserver" },
				freeze: true,
				freeze_message: __("Running {0}...", [frappe.utils.escape_html(frm.doc.desc_short)]),
			})
			.then((r) => {
				const m = r.message;
				const ok = m.status === "Succeeded";
				frappe.show_alert(
					{
						message: __("{0} in {1} s, log {2}", [frappe.utils.escape_html(m.status), Number(m.execution_time || 0).toFixed(3), btu_log_link(m.log)]),
						indicator: ok ? "green" : "red",
					},
					ok ? 8 : 20
				);
				frm.reload_doc();
			});
	});
}

function btu_run_via_worker(frm) {
	frappe.call({ method: "btu.btu_core.api.run_task_now", args: { task: frm.doc.name, on: "worker" } }).then((r) => {
		const m = r.message;
		frappe.show_alert({ message: __("Queued on {0} as job {1}", [frappe.utils.escape_html(m.queue), frappe.utils.escape_html(m.job_id)]), indicator: "blue" }, 8);
	});
}

function btu_run_once_at(frm) {
	const dialog = new frappe.ui.Dialog({
		title: __("Run Once At"),
		fields: [
			{
				fieldname: "at",
				fieldtype: "Datetime",
				label: __("Run At"),
				reqd: 1,
				// A Datetime's value is on the system zone's clock; the control shows it, and takes what is typed, in the
				// person's zone (named under the field).
				default: moment(frappe.datetime.system_datetime(), frappe.defaultDatetimeFormat).add(5, "minutes").format(frappe.defaultDatetimeFormat),
				description: __("Creates an enabled one-off schedule that runs this Task once, at this moment."),
			},
		],
		primary_action_label: __("Create Schedule"),
		primary_action(values) {
			frappe.call({ method: "btu.btu_core.api.run_once_at", args: { task: frm.doc.name, at: values.at } }).then((r) => {
				dialog.hide();
				const m = r.message;
				frappe.show_alert({ message: __("Schedule {0}: {1}", [frappe.utils.escape_html(m.schedule), frappe.utils.escape_html(m.description)]), indicator: "green" }, 8);
				frappe.set_route("Form", "BTU Task Schedule", m.schedule);
			});
		},
	});
	dialog.show();
}
