// BTU Task Schedule form: live preview of the next fires, pause/resume, run now,
// scheduler ping and the scheduler's answer to each save (a realtime event).
// Alerts, dialogs and tables render HTML: every value put into them goes through btu_esc.

const BTU_PREVIEW_FIELDS = [
	"run_frequency", "minute", "hour", "day_of_week", "day_of_month", "month", "cron_string", "every",
	"every_unit", "run_at", "time_zone", "start_time", "end_time", "run_limit", "jitter_secs", "enabled", "paused",
	"calendar", "calendar_policy",
];

frappe.ui.form.on("BTU Task Schedule", {
	setup(frm) {
		if (!frappe.__btu_sync_listener) {
			frappe.__btu_sync_listener = true;
			frappe.realtime.on("btu_scheduler_sync", (m) => {
				frappe.show_alert(
					{ message: `${btu_esc(m.schedule)}: ${btu_esc(m.message)}`, indicator: m.outcome === "ok" ? "green" : "orange" },
					m.outcome === "ok" ? 6 : 15
				);
			});
		}
	},

	onload(frm) {
		if (!frm.is_new()) return;
		frappe.call({ method: "frappe.client.get", args: { doctype: "BTU Configuration" } }).then((r) => {
			const config = r.message || {};
			if (!frm.doc.time_zone && config.default_time_zone) frm.set_value("time_zone", config.default_time_zone);
			if (config.default_catch_up_policy) frm.set_value("catch_up_policy", config.default_catch_up_policy);
			if (config.default_catch_up_window) frm.set_value("catch_up_window", config.default_catch_up_window);
			if (config.default_overlap_policy) frm.set_value("overlap_policy", config.default_overlap_policy);
		});
	},

	refresh(frm) {
		btu_render_preview(frm);
		btu_declared(frm);
		if (frm.is_new()) return;
		if (frm.doc.paused) {
			frm.add_custom_button(__("Resume"), () =>
				frappe.call({ method: "btu.btu_core.api.resume", args: { schedule: frm.doc.name } }).then(() => frm.reload_doc())
			);
			frm.dashboard.set_headline_alert(
				`${__("Paused")}: ${btu_esc(frm.doc.pause_note)}`,
				"orange"
			);
		} else {
			frm.add_custom_button(__("Pause"), () => btu_pause(frm));
		}
		frm.add_custom_button(__("Run Now"), () =>
			frappe
				.call({ method: "btu.btu_core.api.run_task_now", args: { task: frm.doc.task, on: "worker", schedule: frm.doc.name } })
				.then((r) => frappe.show_alert({ message: __("Queued on {0} as job {1}", [btu_esc(r.message.queue), btu_esc(r.message.job_id)]), indicator: "blue" }, 8)),
			__("Actions")
		);
		frm.add_custom_button(__("Incidents"), () => frappe.set_route("List", "BTU Alert Incident", { schedule: frm.doc.name }), __("Alerts"));
		frm.add_custom_button(__("Skip Next Run"), () => btu_skip_next(frm), __("Skip"));
		for (const row of frm.doc.skipped_slots || []) {
			frm.add_custom_button(__("Undo skip of {0}", [btu_esc(row.slot_local || row.slot_utc)]), () => btu_unskip(frm, row.slot_utc), __("Skip"));
		}
		frm.add_custom_button(__("Backfill"), () => btu_backfill(frm), __("Actions"));
		frm.add_custom_button(__("Pending Runs"), () => frappe.set_route("List", "BTU Run Request", { schedule: frm.doc.name, status: ["in", ["Pending", "Waiting"]] }), __("Actions"));
		frm.add_custom_button(__("Ping Scheduler"), () => btu_ping(), __("Actions"));
		frm.add_custom_button(__("Next Fires"), () => btu_next_fires_dialog(frm), __("Actions"));
		frm.add_custom_button(__("Recent Runs"), () => btu_recent_runs(frm), __("Actions"));
	},
});

for (const field of BTU_PREVIEW_FIELDS) {
	frappe.ui.form.on("BTU Task Schedule", field, (frm) => {
		// A preview on its way now shows values no longer on screen: btu_render_preview drops it.
		frm.__btu_preview_asked = (frm.__btu_preview_asked || 0) + 1;
		clearTimeout(frm.__btu_preview_timer);
		frm.__btu_preview_timer = setTimeout(() => btu_render_preview(frm), 400);
	});
}

// As in btu_configuration.js (form scripts share no module): null is "", 0 stays "0".
function btu_esc(value) {
	return frappe.utils.escape_html(value == null ? "" : String(value));
}

// A row an app declares in hooks.py: its fields the server names (onload) are read-only, the intro says where to edit them.
function btu_declared(frm) {
	const declared = (frm.doc.__onload || {}).btu_declared;
	if (!declared) return;
	frm.set_intro(btu_esc(declared.intro), "blue");
	for (const field of declared.fields) frm.set_df_property(field, "read_only", 1);
}

function btu_render_preview(frm) {
	const field = frm.get_field("next_fires_html");
	if (!field) return;
	// Not frm.call with the doc: its reply carries the doc as sent, which Frappe writes over the form's and redraws
	// every field from, so what the person typed or saved while the preview was on its way was undone.
	const asked = (frm.__btu_preview_asked = (frm.__btu_preview_asked || 0) + 1);
	frappe.call({
		method: "btu.btu_core.doctype.btu_task_schedule.btu_task_schedule.preview",
		args: { doc: frm.doc, n: 10 },
	}).then((r) => {
		if (asked !== frm.__btu_preview_asked || !r.message) return;
		field.$wrapper.html(r.message.html);
		const cron = r.message.cron_string;
		if (cron && cron !== frm.doc.cron_string) frm.set_value("cron_string", cron);
	});
}

function btu_skip_next(frm) {
	frappe.prompt(
		[{ fieldname: "count", fieldtype: "Int", label: __("How many runs"), default: 1, reqd: 1 }],
		(values) =>
			frappe
				.call({ method: "btu.btu_core.api.skip_next_runs", args: { schedule: frm.doc.name, count: values.count } })
				.then(() => frm.reload_doc()),
		__("Skip the next runs of {0}", [btu_esc(frm.doc.name)]),
		__("Skip")
	);
}

function btu_unskip(frm, slot) {
	frappe.call({ method: "btu.btu_core.api.unskip", args: { schedule: frm.doc.name, slot: slot } }).then(() => frm.reload_doc());
}

function btu_pause(frm) {
	frappe.prompt(
		[{ fieldname: "note", fieldtype: "Small Text", label: __("Why (shown on the schedule)") }],
		(values) =>
			frappe
				.call({ method: "btu.btu_core.api.pause", args: { schedule: frm.doc.name, note: values.note } })
				.then(() => frm.reload_doc()),
		__("Pause {0}", [btu_esc(frm.doc.name)]),
		__("Pause")
	);
}

function btu_ping() {
	frappe.call({ method: "btu.btu_core.api.ping" }).then((r) => {
		const m = r.message;
		frappe.msgprint({ title: __("BTU Scheduler"), message: btu_esc(m.message), indicator: m.outcome === "ok" ? "green" : "orange" });
	});
}

function btu_next_fires_dialog(frm) {
	frappe.call({ method: "btu.btu_core.api.next_fires", args: { schedule: frm.doc.name, n: 25 } }).then((r) => {
		const p = r.message;
		const rows = p.fires
			.map((f, i) => `<tr><td>${i + 1}</td><td>${btu_esc(f.schedule_zone)}</td><td>${btu_esc(f.user_zone)}</td><td class="text-muted">${btu_esc(f.utc)}</td><td>${btu_esc(f.note)}</td></tr>`)
			.join("");
		frappe.msgprint({
			title: __("Next fires of {0}", [btu_esc(frm.doc.name)]),
			wide: true,
			message: `<p><b>${btu_esc(p.description)}</b></p><table class="table table-bordered table-sm"><thead><tr><th>#</th><th>${btu_esc(__("{0} (schedule)", [p.time_zone]))}</th><th>${btu_esc(__("{0} (you)", [p.user_time_zone]))}</th><th>${__("UTC")}</th><th></th></tr></thead><tbody>${rows}</tbody></table>`,
		});
	});
}

function btu_recent_runs(frm) {
	frappe.call({ method: "btu.btu_core.api.recent_runs", args: { schedule: frm.doc.name, limit: 20 } }).then((r) => {
		const colour = { Succeeded: "green", Failed: "red", "Timed Out": "red", Started: "blue", Skipped: "gray" };
		const rows = (r.message || [])
			.map(
				(l) =>
					`<tr><td><a href="/app/btu-task-log/${encodeURIComponent(l.name)}">${btu_esc(l.name)}</a></td><td><span class="indicator-pill ${colour[l.status] || "gray"}">${btu_esc(l.status)}</span></td><td>${btu_esc(l.slot_utc)}</td><td>${btu_esc(l.date_time_started)}</td><td>${l.execution_time == null ? "" : Number(l.execution_time).toFixed(3)}</td><td>${l.fire_lag_ms == null ? "" : Number(l.fire_lag_ms).toFixed(1)}</td></tr>`
			)
			.join("");
		frappe.msgprint({
			title: __("Recent runs of {0}", [btu_esc(frm.doc.name)]),
			wide: true,
			message: rows
				? `<table class="table table-bordered table-sm"><thead><tr><th>${__("Log")}</th><th>${__("Status")}</th><th>${__("Slot (UTC)")}</th><th>${__("Started")}</th><th>${__("Duration (s)")}</th><th>${__("Fire lag (ms)")}</th></tr></thead><tbody>${rows}</tbody></table>`
				: __("No runs yet."),
		});
	});
}

function btu_backfill(frm) {
	frappe.prompt(
		[
			{ fieldname: "start", fieldtype: "Datetime", label: __("From"), reqd: 1 },
			{ fieldname: "end", fieldtype: "Datetime", label: __("To"), reqd: 1 },
			{
				fieldname: "one_at_a_time",
				fieldtype: "Check",
				label: __("One at a time (each slot after the one before has run)"),
				default: 1,
				description: __("Unticked: every slot is due now, and runs as workers take them. Slots with a Task Log are not run again; at most 1,000 slots."),
			},
		],
		(values) =>
			frappe
				.call({ method: "btu.btu_core.api.backfill", args: { schedule: frm.doc.name, ...values } })
				.then((r) => {
					const m = r.message;
					frappe.msgprint({
						title: __("Backfill of {0}", [btu_esc(frm.doc.name)]),
						indicator: "green",
						message: __("{0} slots in the range: {1} requested, {2} requested before, {3} ran already.", [
							m.slots, m.requested.length, m.already_requested.length, m.already_ran.length,
						]),
					});
				}),
		__("Backfill {0}", [btu_esc(frm.doc.name)]),
		__("Backfill")
	);
}
