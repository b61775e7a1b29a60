"""UTC ISO 8601 as both halves write and read it."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

import pytest

from btu.shared.instants import format_utc_iso, parse_iso, parse_utc_iso, slot_text

pytestmark = pytest.mark.versions

MOMENT = datetime(2026, 11, 22, 2, 33, 0, 250_400, timezone.utc)


def test_format_to_the_second_or_millisecond():
	assert format_utc_iso(MOMENT) == "2026-11-22T02:33:00Z"
	assert format_utc_iso(MOMENT, milliseconds=True) == "2026-11-22T02:33:00.250Z"
	assert format_utc_iso(MOMENT.astimezone(timezone(timedelta(hours=5, minutes=30)))) == "2026-11-22T02:33:00Z"


def test_slot_text_has_milliseconds_only_with_a_fraction():
	assert slot_text(MOMENT.replace(microsecond=0)) == "2026-11-22T02:33:00Z"
	assert slot_text(MOMENT) == "2026-11-22T02:33:00.250Z"


@pytest.mark.parametrize(
	"text", ["2026-11-22T02:33:00.250Z", "2026-11-22t02:33:00.250z", " 2026-11-22T08:03:00.250+05:30 "]
)
def test_parse_utc_iso_reads_z_and_offsets(text):
	parsed = parse_utc_iso(text, "slot")
	assert parsed == MOMENT.replace(microsecond=250_000) and parsed.tzinfo == timezone.utc


def test_parse_iso_leaves_naive_to_the_caller_and_parse_utc_iso_refuses_it():
	assert parse_iso("2026-11-22 02:33:00", "after") == datetime(2026, 11, 22, 2, 33)
	with pytest.raises(ValueError, match=r"slot '2026-11-22 02:33:00': has no UTC offset; add Z"):
		parse_utc_iso("2026-11-22 02:33:00", "slot")


@pytest.mark.parametrize("text", ["tomorrow", "", None, 20261122])
def test_parse_names_the_field_the_text_and_an_example(text):
	with pytest.raises(
		ValueError, match=r"^fire_at .*: not an ISO 8601 instant; expected e\.g\. 2026-11-22T02:33:00Z$"
	):
		parse_iso(text, "fire_at")
