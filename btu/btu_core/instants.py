"""Instants on Frappe's side: now, and the system and user time zones Frappe's Datetime fields are in.

Parsing and writing UTC ISO 8601 is shared with the scheduler: `btu.shared.instants`."""

from __future__ import annotations

from datetime import datetime, timezone
from zoneinfo import ZoneInfo

import frappe
from frappe.utils import get_datetime, get_system_timezone

from btu.shared.instants import FRAPPE_DEFAULT_ZONE, parse_iso


def utc_now() -> datetime:
	return datetime.now(timezone.utc)


# The system time zone as System Settings stores it, read without the System Settings Document.
SYSTEM_ZONE_SQL = "select value from `tabSingles` where doctype = 'System Settings' and field = 'time_zone'"


def system_zone() -> ZoneInfo:
	"""The system time zone. Frappe's get_system_timezone loads System Settings as a Document, which costs a forked
	work-horse Frappe's Document module and its imports (PIL among them) before a run's call: while this process has
	not loaded System Settings, one SELECT reads the zone instead."""
	if getattr(frappe.local, "system_settings", None) is None:
		# Read once per background job (a run reads it several times), on each call elsewhere.
		job = getattr(frappe.local, "job", None)
		zone = job.get("btu_system_zone") if job is not None else None
		if zone is None:
			rows = frappe.db.sql(SYSTEM_ZONE_SQL)
			zone = (rows[0][0] if rows else None) or FRAPPE_DEFAULT_ZONE
			if job is not None:
				job.btu_system_zone = zone
		return ZoneInfo(zone)
	return ZoneInfo(get_system_timezone())


def to_system_naive(value: datetime) -> datetime:
	"""What a Frappe Datetime field stores: the system time zone's wall clock, naive."""
	return value.astimezone(system_zone()).replace(tzinfo=None)


def with_offset_to_system_clock(value):
	"""A Datetime field's value as Frappe stores it: one with a UTC offset (an aware datetime, or ISO text a REST client
	sent, "2026-12-01T09:00:00+09:00") moved to the system zone's wall clock at the same moment; anything else (naive,
	empty, unreadable: the field's own checks name it) as it is."""
	moment = value
	if isinstance(value, str):
		try:
			moment = parse_iso(value, "")
		except ValueError:
			return value
	if isinstance(moment, datetime) and moment.tzinfo is not None:
		return to_system_naive(moment)
	return value


def system_now() -> datetime:
	"""Now as a Frappe Datetime field stores it."""
	return to_system_naive(utc_now())


def from_system_naive(value: datetime) -> datetime:
	"""A Frappe Datetime field's naive system-zone wall clock as an aware UTC instant (fold 0 at a DST overlap)."""
	return value.replace(tzinfo=system_zone()).astimezone(timezone.utc)


def to_utc(value: datetime | str, field: str) -> datetime:
	"""A datetime, or text in ISO 8601 or a form Frappe reads, as an aware UTC instant: one with an offset as it says,
	a naive one on the system time zone's wall clock (as Frappe stores Datetimes). InputError (a ValueError) naming
	`field` for unreadable text, TypeError for a value neither text nor a datetime."""
	if isinstance(value, str):
		try:
			value = parse_iso(value, field)
		except ValueError as unreadable:
			try:
				value = get_datetime(value) if value.strip() else None
			except Exception:
				raise unreadable from None
			if value is None:
				raise unreadable from None
	if not isinstance(value, datetime):
		raise TypeError(f"{field} {value!r}: is not a date and time")
	return value.astimezone(timezone.utc) if value.tzinfo is not None else from_system_naive(value)


def user_time_zone(user: str | None = None) -> str:
	"""The user's own time zone (User.time_zone), else the system one."""
	user = user or frappe.session.user
	return frappe.get_cached_value("User", user, "time_zone") or get_system_timezone()
