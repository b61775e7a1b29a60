"""Instants between the scheduler (UTC ISO 8601) and Frappe (naive, system time zone)."""

from __future__ import annotations

from datetime import datetime, timezone
from zoneinfo import ZoneInfo

import frappe
from frappe.utils import get_datetime, get_system_timezone


def utc_now() -> datetime:
	return datetime.now(timezone.utc)


def parse_utc_iso(text: str, field: str = "slot") -> datetime:
	"""An aware UTC datetime from "2026-11-22T02:33:00Z" (or any ISO 8601 with an offset)."""
	try:
		value = datetime.fromisoformat(text.strip().replace("Z", "+00:00").replace("z", "+00:00"))
	except (AttributeError, ValueError):
		raise ValueError(f"{field} {text!r}: not an ISO 8601 instant; expected e.g. 2026-11-22T02:33:00Z") from None
	if value.tzinfo is None:
		raise ValueError(f"{field} {text!r}: has no UTC offset; expected e.g. 2026-11-22T02:33:00Z")
	return value.astimezone(timezone.utc)


def format_utc_iso(value: datetime, *, milliseconds: bool = False) -> str:
	value = value.astimezone(timezone.utc)
	if milliseconds:
		return value.strftime("%Y-%m-%dT%H:%M:%S.") + f"{value.microsecond // 1000:03d}Z"
	return value.strftime("%Y-%m-%dT%H:%M:%SZ")


def system_zone() -> ZoneInfo:
	return ZoneInfo(get_system_timezone())


def to_system_naive(value: datetime) -> datetime:
	"""What a Frappe Datetime field stores: the system time zone's wall clock, naive."""
	return value.astimezone(system_zone()).replace(tzinfo=None)


def system_naive_to_utc(value) -> datetime:
	"""The UTC instant of a Datetime field value (naive, system time zone)."""
	naive = get_datetime(value)
	return naive.replace(tzinfo=system_zone()).astimezone(timezone.utc)


def user_time_zone(user: str | None = None) -> str:
	"""The user's own time zone (User.time_zone), else the system one."""
	user = user or frappe.session.user
	return frappe.get_cached_value("User", user, "time_zone") or get_system_timezone()
