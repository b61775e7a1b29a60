"""The original's Python-literal arguments as JSON: converted when they can be, refused by name when not."""

from __future__ import annotations

import json

import pytest

from btu.btu_core.upgrade.convert.arguments import LiteralError, to_json


@pytest.mark.parametrize(
	"text, expected",
	[
		("{'days': 3, 'dry_run': True, 'note': None}", {"days": 3, "dry_run": True, "note": None}),
		("{'ids': (1, 2), 'nested': {'a': [1.5, 'x']}}", {"ids": [1, 2], "nested": {"a": [1.5, "x"]}}),
		("  {'company': 'ACME'}\n", {"company": "ACME"}),
		("{}", None),
	],
)
def test_python_literal_becomes_the_same_json(text, expected):
	converted = to_json("arguments", text)
	if expected is None:
		assert converted is None
	else:
		assert json.loads(converted) == expected


@pytest.mark.parametrize("text", [None, "", "   ", '{"days": 3, "dry_run": false}'])
def test_empty_or_json_is_left_alone(text):
	assert to_json("arguments", text) is None


def test_converting_twice_changes_nothing():
	once = to_json("arguments", "{'a': True}")
	assert to_json("arguments", once) is None


@pytest.mark.parametrize(
	"text, words",
	[
		("{'a': 1,, }", "neither JSON nor a Python literal"),
		("['a', 'b']", "not a dict"),
		("{1: 'a'}", "key 1"),
		("{'s': {1, 2}}", "set"),
		("{'b': b'x'}", "bytes"),
		("{'n': float('nan')}", "neither JSON"),
		("{'c': 1j}", "complex"),
	],
)
def test_what_cannot_convert_names_the_field_and_the_fix(text, words):
	with pytest.raises(LiteralError) as caught:
		to_json("argument_overrides", text)
	message = str(caught.value)
	assert message.startswith("argument_overrides ")
	assert words in message
	assert "JSON" in message
