"""A schedule's next fires for people (the form's preview, the Scheduled Task Summary report): in UTC, the schedule's
zone and the user's, skipped, excluded and moved runs marked; its pending run requests."""

from __future__ import annotations

from datetime import datetime

import frappe
from frappe import _
from frappe.utils import escape_html

from btu.btu_core.instants import user_time_zone, utc_now
from btu.btu_core.schedules.spec import spec_of
from btu.shared.instants import format_utc_iso
from btu.shared.schedule import parse_zone


def next_fires(doc, n: int = 10, after: datetime | None = None) -> dict:
	"""The next `n` fires, each in UTC, in the schedule's zone and in the user's zone."""
	spec = spec_of(doc)
	user_zone_name = user_time_zone()
	user_zone = parse_zone(user_zone_name)
	fires = []
	for entry in spec.preview_marked(max(1, min(int(n), 100)), after or utc_now()):
		instant = entry["at"]
		fires.append(
			{
				"utc": format_utc_iso(instant),
				"schedule_zone": instant.astimezone(spec.zone).strftime("%a %Y-%m-%d %H:%M:%S %Z"),
				"user_zone": instant.astimezone(user_zone).strftime("%a %Y-%m-%d %H:%M:%S %Z"),
				# "" a fire; "skipped", "excluded": a run that will not happen there; "moved": a fire moved off an
				# excluded day.
				"mark": entry["mark"],
				"note": _note(entry),
			}
		)
	return {
		"schedule": doc.name,
		"description": spec.describe(),
		"time_zone": spec.zone_name,
		"user_time_zone": user_zone_name,
		"paused": bool(doc.get("paused")),
		"enabled": bool(doc.get("enabled")),
		"fires": fires,
		"pending_runs": pending_runs(doc.name) if doc.name and not doc.is_new() else [],
	}


def pending_runs(schedule: str, limit: int = 20) -> list[dict]:
	"""The schedule's retries and backfilled slots not run yet, soonest first."""
	return frappe.get_all(
		"BTU Run Request",
		filters={"schedule": schedule, "status": ("in", ("Pending", "Waiting"))},
		fields=["name", "status", "origin", "attempt", "slot_utc", "run_at_utc"],
		order_by="run_at asc, slot_utc asc",
		limit=limit,
	)


def _note(entry: dict) -> str:
	if entry["mark"] == "skipped":
		return _("skipped")
	if entry["mark"] == "excluded":
		return _("excluded (calendar)")
	if entry["mark"] == "moved":
		return _("moved from {0}").format(entry["moved_from"].strftime("%a %Y-%m-%d"))
	return ""


def render_html(preview: dict) -> str:
	"""The preview as the table shown in the form's next_fires_html field."""
	notes = []
	if not preview["enabled"]:
		notes.append(_("This schedule is disabled: these are the fires it would have."))
	elif preview["paused"]:
		notes.append(_("This schedule is paused: these fires will not happen until it is resumed."))
	if not preview["fires"]:
		notes.append(_("No fire is left (the schedule has ended, or its only run has passed)."))
	rows, number = [], 0
	for f in preview["fires"]:
		removed = f.get("mark") in ("skipped", "excluded")
		if not removed:
			number += 1
		style = " style='text-decoration: line-through' class='text-muted'" if removed else ""
		rows.append(
			f"<tr data-mark='{escape_html(f.get('mark') or '')}'><td>{'' if removed else number}</td>"
			f"<td{style}>{escape_html(f['schedule_zone'])}</td><td{style}>{escape_html(f['user_zone'])}</td>"
			f"<td class='text-muted'>{escape_html(f['utc'])}</td><td>{escape_html(f.get('note') or '')}</td></tr>"
		)
	rows = "".join(rows)
	columns = (
		"#",
		_("{0} (schedule)").format(preview["time_zone"]),
		_("{0} (you)").format(preview["user_time_zone"]),
		_("UTC"),
		"",
	)
	head = "<tr>" + "".join(f"<th>{escape_html(column)}</th>" for column in columns) + "</tr>"
	note_html = "".join(f"<p class='text-muted'>{escape_html(note)}</p>" for note in notes)
	return (
		f"<div class='btu-next-fires'><p><b>{escape_html(preview['description'])}</b></p>{note_html}"
		f"<table class='table table-bordered table-sm'><thead>{head}</thead><tbody>{rows}</tbody></table>"
		f"{pending_html(preview)}</div>"
	)


def pending_html(preview: dict) -> str:
	"""Retries and backfilled slots still to run, under the regular fires."""
	runs = preview.get("pending_runs") or []
	if not runs:
		return ""
	items = "".join(
		f"<li data-origin='{escape_html(run.origin)}'>{escape_html(pending_text(run))}</li>" for run in runs
	)
	return f"<p><b>{escape_html(_('Retries and backfills to run'))}</b></p><ul class='btu-pending-runs'>{items}</ul>"


def pending_text(run) -> str:
	"""One pending run's line: its origin, slot, attempt, status and when it runs."""
	return _("{0} of slot {1}, attempt {2}: {3} at {4} UTC").format(
		_(run.origin), run.slot_utc, run.attempt, _(run.status).lower(), run.run_at_utc
	)
