"""Instants on Frappe's side: now, and the system and user time zones Frappe's Datetime fields are in.

Parsing and writing UTC ISO 8601 is shared with the scheduler: `btu.shared.instants`."""

from __future__ import annotations

from datetime import datetime, timezone
from zoneinfo import ZoneInfo

import frappe
from frappe.utils import get_system_timezone


def utc_now() -> datetime:
	return datetime.now(timezone.utc)


def system_zone() -> ZoneInfo:
	return ZoneInfo(get_system_timezone())


def to_system_naive(value: datetime) -> datetime:
	"""What a Frappe Datetime field stores: the system time zone's wall clock, naive."""
	return value.astimezone(system_zone()).replace(tzinfo=None)


def from_system_naive(value: datetime) -> datetime:
	"""A Frappe Datetime field's naive system-zone wall clock as an aware UTC instant (fold 0 at a DST overlap)."""
	return value.replace(tzinfo=system_zone()).astimezone(timezone.utc)


def user_time_zone(user: str | None = None) -> str:
	"""The user's own time zone (User.time_zone), else the system one."""
	user = user or frappe.session.user
	return frappe.get_cached_value("User", user, "time_zone") or get_system_timezone()
