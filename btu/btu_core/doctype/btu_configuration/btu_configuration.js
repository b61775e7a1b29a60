// BTU Configuration: the scheduler's status panel (from its status in Redis), ping and resync.

// The leader's heartbeat is older than this when no scheduler is alive.
const BTU_HEARTBEAT_STALE_SECS = 60;
// The panel reads the heartbeats live (a scheduler writes one every 5 s) this often while the form is open.
const BTU_STATUS_REFRESH_SECS = 10;

frappe.ui.form.on("BTU Configuration", {
	refresh(frm) {
		btu_render_status(frm);
		btu_render_upgrade(frm);
		clearInterval(frm.btu_status_timer);
		frm.btu_status_timer = setInterval(() => {
			if (cur_frm !== frm || !frm.get_field("status_html").$wrapper.is(":visible")) {
				clearInterval(frm.btu_status_timer);
				return;
			}
			btu_render_status(frm);
		}, BTU_STATUS_REFRESH_SECS * 1000);
		frm.add_custom_button(__("Refresh Status"), () => btu_render_status(frm));
		frm.add_custom_button(__("Ping Scheduler"), () =>
			frappe.call({ method: "btu.btu_core.api.ping" }).then((r) => {
				const m = r.message;
				frappe.msgprint({ title: __("BTU Scheduler"), message: frappe.utils.escape_html(m.message), indicator: btu_indicator(m.outcome) });
			})
		);
		frm.add_custom_button(__("Resync All Schedules"), () =>
			frappe.call({ method: "btu.btu_core.api.resync", freeze: true }).then((r) => {
				const m = r.message;
				const last = m.sent[m.sent.length - 1];
				frappe.msgprint({
					title: __("Resync"),
					indicator: m.complete ? "green" : "orange",
					message: m.complete
						? __("{0} schedules sent to the scheduler.", [m.sent.length])
						: __("Sent {0} of {1}. {2}", [m.sent.length, m.requested, frappe.utils.escape_html(last ? last.message : "")]),
				});
			})
		);
	},
});

// ok: green; denied (Redis refused the bench's user: a grant to add) red; unreachable or refused by the scheduler: orange.
function btu_indicator(outcome) {
	return { ok: "green", denied: "red" }[outcome] || "orange";
}

function btu_esc(value) {
	return frappe.utils.escape_html(value == null ? "" : String(value));
}

function btu_table(headers, rows) {
	if (!rows.length) return `<p class="text-muted">${__("None")}</p>`;
	const head = headers.map((h) => `<th>${btu_esc(h)}</th>`).join("");
	const body = rows.map((r) => `<tr>${r.map((c) => `<td>${btu_esc(c)}</td>`).join("")}</tr>`).join("");
	return `<table class="table table-bordered table-sm"><thead><tr>${head}</tr></thead><tbody>${body}</tbody></table>`;
}

// The btu_schedules entries bench migrate skipped: shown whether or not a scheduler runs, as they never reach one.
function btu_declared_skipped(s) {
	const skipped = s.declared_skipped || [];
	if (!skipped.length) return "";
	return `<h5 class="text-danger">${__("btu_schedules entries bench migrate skipped")}</h5>` +
		btu_table([__("App"), __("Entry"), __("Reason")], skipped.map((row) => [row.app, row.entry || "", row.reason]));
}

function btu_render_status(frm) {
	const wrapper = frm.get_field("status_html").$wrapper;
	frappe.call({ method: "btu.btu_core.api.status" }).then((r) => {
		const s = r.message || {};
		const original = s.original_btu ? `<p class="text-danger"><b>${__("The original BTU's daemon")}</b>: ${btu_esc(s.original_btu)}</p>` : "";
		if (s.error) {
			const title = s.error_outcome === "denied" ? __("Permission denied by Redis.") : __("Redis failed.");
			wrapper.html(original + `<p class="text-danger"><b>${title}</b> ${btu_esc(s.error)}</p>` + btu_declared_skipped(s));
			return;
		}
		if (!s.published) {
			wrapper.html(
				original +
				`<p class="text-warning"><b>${__("No scheduler status in Redis.")}</b> ${__("No BTU scheduler has run against this bench's Redis recently. Each Frappe worker runs one once restarted after BTU's install (<code>bench restart</code>), unless <code>btu_scheduler_in_workers</code> is off; or start a dedicated one with <code>bench btu-scheduler</code> (see <code>btu-scheduler setup</code> for Procfile, supervisor and systemd).")}</p>` +
					btu_declared_skipped(s)
			);
			return;
		}
		const leader = s.leader || {};
		const site = s.this_site || {};
		const age = s.heartbeat_age_secs;
		const healthy = age != null && age < BTU_HEARTBEAT_STALE_SECS;
		let html = original + `<p><span class="indicator-pill ${healthy ? "green" : "red"}">${healthy ? __("Scheduler alive") : __("No recent heartbeat")}</span>
			&nbsp; ${__("Status updated")}: ${btu_esc(s.updated_at)} &nbsp; ${__("Checked")}: ${btu_esc(s.checked_at)}</p>`;
		if (s.shared_redis_message) {
			html += `<p class="text-danger"><b>${__("Benches share BTU's keys on this Redis.")}</b> ${btu_esc(s.shared_redis_message)}</p>`;
		}
		html += `<h5>${__("Leader")}</h5>` + btu_table(
			[__("Holder"), __("Runs in"), __("Host"), __("PID"), __("Since"), __("Epoch"), __("Heartbeat age (s)")],
			leader.holder ? [[leader.holder, btu_runs_in(leader), leader.host, leader.pid, leader.since, leader.epoch, age]] : []
		);
		html += `<h5>${__("Processes")}</h5>` + btu_table(
			[
				__("Process"), __("Role"), __("Runs in"), __("Host"), __("PID"), __("Started"), __("Heartbeat"), __("Redis master"), __("Replicas (fires wait for)"),
				__("Fires since start"), __("Fire lag p50 / p99 (ms)"), __("Skipped"),
			],
			(s.processes || []).map((p) => {
				const m = p.metrics || {};
				const skipped = Object.entries(m.skipped || {}).map(([reason, count]) => `${reason} ${count}`).join(", ");
				return [
					p.id, p.role, btu_runs_in(p), p.host, p.pid, p.started_at, p.heartbeat_at, p.redis || "",
					p.replicas == null ? "" : `${p.replicas} (${p.replica_acks || 0})`,
					m.fires == null ? "" : m.fires, m.lag_p50_ms == null ? "" : `${m.lag_p50_ms} / ${m.lag_p99_ms}`, skipped,
				];
			})
		);
		html += `<h5>${__("This site")} (${btu_esc(s.site)})</h5>`;
		if (site.database) html += `<p class="text-danger">${__("Database")}: ${btu_esc(site.database)}</p>`;
		if (site.paused_reason) html += `<p class="text-warning">${__("Paused")}: ${btu_esc(site.paused_reason)}</p>`;
		const counters = site.counters || {};
		html += btu_table(
			[__("Schedules"), __("Retries, backfills, chained runs"), __("Oldest overdue (ms)"), ...Object.keys(counters)],
			[[site.schedules == null ? "" : site.schedules, site.run_requests || 0, site.oldest_overdue_ms == null ? "" : site.oldest_overdue_ms, ...Object.values(counters)]]
		);
		const invalid = site.invalid || {};
		if (Object.keys(invalid).length) {
			html += `<h5 class="text-danger">${__("Schedules the scheduler refused")}</h5>` + btu_table([__("Schedule"), __("Reason")], Object.entries(invalid));
		}
		html += btu_declared_skipped(s);
		const next = site.next_fires || [];
		const with_slot = next.some((f) => f.slot);
		html += `<h5>${__("Next fires")}</h5>` + btu_table(
			with_slot ? [__("Schedule"), __("Slot"), __("Fire at")] : [__("Schedule"), __("Fire at")],
			next.map((f) => (with_slot ? [f.schedule, f.slot, f.fire_at] : [f.schedule, f.fire_at]))
		);
		html += `<h5>${__("Recent fires")}</h5>` + btu_table(
			[__("Schedule"), __("Slot"), __("Enqueued at"), __("Lag (ms)"), __("Job"), __("Outcome")],
			(site.recent_fires || []).map((f) => [f.schedule, f.slot, f.enqueued_at, f.lag_ms, f.job_id, f.outcome])
		);
		wrapper.html(html);
	});
}

// What the upgrade from the original BTU left to do; the section stays empty on a site that never had it.
function btu_render_upgrade(frm) {
	const wrapper = frm.get_field("upgrade_html").$wrapper;
	frappe.call({ method: "btu.btu_core.api.upgrade_report" }).then((r) => {
		const report = r.message || {};
		const undeclared = report.undeclared || [];
		const notes = report.notes || [];
		let html = "";
		if (undeclared.length) {
			html += `<h5 class="text-danger">${__("Tasks whose function no app declares (their schedules do not run)")}</h5>` + btu_table(
				[__("Task"), __("Function"), __("Enabled schedules"), __("Add to"), __("Reason")],
				undeclared.map((t) => [t.task, t.function_string, t.schedules.join(", "), t.hook_line ? `${t.hooks_file}: ${t.hook_line}` : "", t.reason])
			) + `<p>${__("bench --site {0} btu-declare-tasks --app your_app prints (or with --write appends) the btu_tasks block of that app's own functions.", [btu_esc(frappe.boot.sitename || "site")])}</p>`;
		}
		if (notes.length) {
			html += `<h5 class="text-warning">${__("Values the upgrade kept as they were")}</h5>` + btu_table(
				[__("DocType"), __("Name"), __("Field"), __("Value"), __("What to do")],
				notes.map((n) => [n.doctype, n.name, n.field, n.value, n.note])
			);
		}
		wrapper.html(html || `<p class="text-muted">${__("Nothing left from an upgrade.")}</p>`);
	});
}

// What runs a scheduler process: a dedicated one, or a Frappe worker's candidate (btu/scheduler_daemon/leading/worker_candidate.py).
function btu_runs_in(process) {
	return process.kind === "worker"
		? __("Frappe worker (pid {0})", [process.worker_pid])
		: __("Dedicated process");
}
