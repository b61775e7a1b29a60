"""A BTU Task Schedule document as schedule semantics (`btu.shared.schedule.ScheduleSpec`), with its calendar's dates
and its skipped runs: what the preview, skip, backfill, retries and the missed-fire watchdog compute from.

It loads the schedule rules (croniter among them): the run path imports it only after the call."""

from __future__ import annotations

import frappe
from frappe.utils import get_system_timezone

from btu.btu_core.schedules.calendars import calendar_dates
from btu.shared.schedule import ScheduleSpec
from btu.shared.schedule.row import EXCLUDED_KEY, SKIPPED_KEY, SPEC_FIELDS


def spec_of(doc, skipped: bool = True) -> ScheduleSpec:
	"""The validated semantics of a schedule document, with its calendar and (unless not `skipped`) its
	skipped runs (raises ScheduleError)."""
	row = {field: doc.get(field) for field in SPEC_FIELDS}
	row[SKIPPED_KEY] = [r.slot_utc for r in doc.get("skipped_slots") or []] if skipped else []
	row[EXCLUDED_KEY] = calendar_dates(doc.get("calendar"))
	if not row["creation"]:
		# An unsaved form: an Interval without a start anchors on "now", as saving would.
		row["creation"] = frappe.utils.now()
	return ScheduleSpec.from_row(row, system_time_zone=get_system_timezone())
