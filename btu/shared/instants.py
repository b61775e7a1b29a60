"""Instants as both halves write them: epoch milliseconds in Redis, UTC ISO 8601 with Z in jobs and Logs."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone
from functools import lru_cache

from btu.shared.messages import InputError, _

# What Frappe (v15 and v16, frappe.utils.data.get_system_timezone) uses when System Settings has no time_zone
# (btu_core's test_run_path checks it against Frappe's own answer).
FRAPPE_DEFAULT_ZONE = "Asia/Kolkata"

EPOCH = datetime(1970, 1, 1, tzinfo=timezone.utc)
ISO_EXAMPLE = "2026-11-22T02:33:00Z"


def to_ms(moment: datetime) -> int:
	return (moment - EPOCH) // timedelta(milliseconds=1)


def from_ms(ms: int | str) -> datetime:
	return EPOCH + timedelta(milliseconds=int(ms))


def format_utc_iso(moment: datetime, *, milliseconds: bool = False) -> str:
	"""`moment` as UTC ISO 8601 with Z: "2026-11-22T02:33:00Z", with `milliseconds` "2026-11-22T02:33:00.250Z"."""
	moment = moment.astimezone(timezone.utc)
	text = (
		f"{moment.year:04d}-{moment.month:02d}-{moment.day:02d}"
		f"T{moment.hour:02d}:{moment.minute:02d}:{moment.second:02d}"
	)
	if milliseconds:
		text += f".{moment.microsecond // 1000:03d}"
	return text + "Z"


@lru_cache(maxsize=4096)
def slot_text(slot: datetime) -> str:
	"""A slot as UTC ISO 8601 with Z, with milliseconds only if it has a fraction; cached, as schedules share slots."""
	return format_utc_iso(slot, milliseconds=bool(slot.microsecond))


def parse_iso(text: str, field: str) -> datetime:
	"""The datetime ISO 8601 `text` writes ("Z" or "z" for UTC): aware with an offset, naive without.

	An InputError (a ValueError) names `field`, the text and an example; callers decide what a naive value means."""
	try:
		return datetime.fromisoformat(text.strip().replace("Z", "+00:00").replace("z", "+00:00"))
	except (AttributeError, ValueError):
		raise InputError(
			field, text, _("not an ISO 8601 instant; expected e.g. {example}"), example=ISO_EXAMPLE
		) from None


def parse_utc_iso(text: str, field: str) -> datetime:
	"""The aware UTC datetime of ISO 8601 `text` with an offset ("Z", "+05:30"); InputError for a naive one."""
	value = parse_iso(text, field)
	if value.tzinfo is None:
		raise InputError(
			field, text, _("has no UTC offset; add Z for UTC or +HH:MM, e.g. {example}"), example=ISO_EXAMPLE
		)
	return value.astimezone(timezone.utc)
