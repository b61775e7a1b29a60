"""The original's Run Later entries (Redis hashes) as run requests: pending ones converted, others refused by field."""

from __future__ import annotations

import json
from datetime import datetime, timezone

import pytest

from btu.btu_core.upgrade.convert.run_later import RunLaterError, entry

KEY = "btu_scheduler:run_later:abc"
FIELDS = {
	"uid": "abc", "short_name": "Send invoices", "target_queue": "long", "not_before_time": "2026-12-01T09:30:00+00:00",
	"not_before_timestamp": "1796117400", "path_to_function": "myapp.billing.send", "arguments": '{"batch": 7}',
	"status": "pending",
}  # fmt: skip


def test_a_pending_entry_is_a_request_at_its_moment():
	request = entry(KEY, FIELDS)
	assert (request.method, json.loads(request.kwargs), request.queue, request.title) == (
		"myapp.billing.send",
		{"batch": 7},
		"long",
		"Send invoices",
	)
	assert request.run_at == datetime(2026, 12, 1, 9, 30, tzinfo=timezone.utc)
	assert request.name == entry(KEY, FIELDS).name and request.name.startswith("RR-")


def test_the_epoch_stands_in_for_a_bad_iso_moment():
	assert entry(KEY, FIELDS | {"not_before_time": "soon"}).run_at == datetime.fromtimestamp(1796117400, timezone.utc)


def test_done_entries_are_not_requests():
	assert entry(KEY, FIELDS | {"status": "done"}) is None


@pytest.mark.parametrize(
	"change, field",
	[
		({"path_to_function": ""}, "path_to_function"),
		({"arguments": "{'a': 1}"}, "arguments"),
		({"arguments": "[1]"}, "arguments"),
		({"not_before_time": "x", "not_before_timestamp": "y"}, "not_before_time"),
	],
)
def test_an_entry_that_cannot_convert_names_its_field(change, field):
	with pytest.raises(RunLaterError) as caught:
		entry(KEY, FIELDS | change)
	assert caught.value.field == field and KEY in str(caught.value)
