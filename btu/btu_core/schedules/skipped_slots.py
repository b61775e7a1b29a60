"""A schedule's skipped runs (BTU Skipped Slot rows): tidied on save, skipped a few at a time ("skip next runs"),
unskipped. A skipped slot never fires (btu.shared.schedule's semantics); the scheduler reads the rows with the
schedule."""

from __future__ import annotations

import frappe
from frappe import _

from btu.btu_core.instants import utc_now
from btu.btu_core.messages import input_error
from btu.btu_core.schedules.spec import spec_of
from btu.shared.instants import slot_text
from btu.shared.schedule import ScheduleError
from btu.shared.schedule.row import skipped_instant
from btu.shared.schedule.zones import utc

# How many runs one "skip next runs" may skip.
MAX_SKIP_AT_ONCE = 100


def tidy_skipped(doc, base_spec) -> list[str]:
	"""Normalise a schedule's skipped runs before it is saved: each its canonical UTC text and local time; those
	past the catch-up window, repeats, and those that are no run of the schedule (its cron changed, a hand-made row)
	removed. A skipped run passed less than the catch-up window ago stays: a scheduler behind (down, failing over)
	would still catch it up. `base_spec` is the schedule without its skipped runs. Returns the runs removed as no
	runs of the schedule, for the user."""
	horizon = utc_now().timestamp() - base_spec.catch_up_window.total_seconds()
	kept, dropped, seen = [], [], set()
	for row in doc.get("skipped_slots") or []:
		try:
			instant = skipped_instant(row.slot_utc)
		except ScheduleError as exc:
			frappe.throw(_("Skipped run {0}: {1}").format(row.idx, input_error(exc)), title=_("Invalid schedule"))
		if instant in seen:
			continue
		seen.add(instant)
		if instant < horizon:
			continue  # no scheduler catches it up any more: nothing left to skip
		if base_spec.first(instant) != instant:
			dropped.append(slot_text(utc(instant)))
			continue
		row.slot_utc = slot_text(utc(instant))
		row.slot_local = utc(instant).astimezone(base_spec.zone).strftime("%a %Y-%m-%d %H:%M:%S %Z")
		row.skipped_by = row.skipped_by or frappe.session.user
		kept.append(row)
	if len(kept) != len(doc.get("skipped_slots") or []):
		doc.set("skipped_slots", kept)
	return dropped


def next_slots(spec, count: int) -> list[int]:
	"""The next `count` slots of a spec (exclusions applied) after now, as epoch seconds."""
	slots = []
	slot = spec.first(int(utc_now().timestamp()) + 1)
	while slot is not None and len(slots) < count:
		slots.append(slot)
		slot = spec.first(slot + 1)
	return slots


def skip_next(doc, count: int) -> list[str]:
	"""Skip the schedule's next `count` runs (those not skipped yet); save; the slots skipped, as UTC texts."""
	if not 1 <= count <= MAX_SKIP_AT_ONCE:
		frappe.throw(_("count {0}: skip from 1 to {1} runs at once").format(count, MAX_SKIP_AT_ONCE))
	try:
		slots = next_slots(spec_of(doc), count)
	except ScheduleError as exc:
		frappe.throw(input_error(exc), title=_("Invalid schedule"))
	if not slots:
		frappe.throw(_("{0} has no run left to skip").format(doc.name))
	texts = [slot_text(utc(slot)) for slot in slots]
	for text in texts:
		doc.append("skipped_slots", {"slot_utc": text, "skipped_by": frappe.session.user})
	doc.save()
	return texts


def unskip(doc, slot: str) -> str:
	"""Run a skipped slot again; save; its UTC text."""
	try:
		instant = skipped_instant(slot)
	except ScheduleError as exc:
		frappe.throw(input_error(exc))
	rows = [row for row in doc.get("skipped_slots") or [] if _instant_or_none(row.slot_utc) == instant]
	if not rows:
		frappe.throw(_("{0}: the run at {1} is not skipped").format(doc.name, slot_text(utc(instant))))
	doc.set("skipped_slots", [row for row in doc.skipped_slots if row not in rows])
	doc.save()
	return slot_text(utc(instant))


def _instant_or_none(text) -> int | None:
	try:
		return skipped_instant(text)
	except ScheduleError:
		return None
