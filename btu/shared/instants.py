"""Instants as both halves write them: epoch milliseconds in Redis, UTC ISO 8601 with Z in jobs and Logs."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone
from functools import lru_cache

EPOCH = datetime(1970, 1, 1, tzinfo=timezone.utc)


def to_ms(moment: datetime) -> int:
	return (moment - EPOCH) // timedelta(milliseconds=1)


def from_ms(ms: int | str) -> datetime:
	return EPOCH + timedelta(milliseconds=int(ms))


@lru_cache(maxsize=4096)
def slot_text(slot: datetime) -> str:
	"""A slot as UTC ISO 8601 with Z (milliseconds only when not zero); cached, as schedules share slots."""
	slot = slot.astimezone(timezone.utc)
	text = f"{slot.year:04d}-{slot.month:02d}-{slot.day:02d}T{slot.hour:02d}:{slot.minute:02d}:{slot.second:02d}"
	if slot.microsecond:
		text += f".{slot.microsecond // 1000:03d}"
	return text + "Z"
