"""Task arguments: one JSON object parser for the Task form, the task runner and the scheduler."""

from __future__ import annotations

import pytest

from btu.shared.task_args import ArgumentsError, json_type, merge_arguments, parse_arguments

pytestmark = pytest.mark.versions


@pytest.mark.parametrize("text", [None, "", "  \n"])
def test_empty_is_no_arguments(text):
	assert parse_arguments(text) == {}


def test_overrides_merge_over_the_task_arguments_one_level():
	merged = merge_arguments('{"name": "Ada", "opts": {"a": 1}}', '{"opts": {"b": 2}}')
	assert merged == {"name": "Ada", "opts": {"b": 2}}


def test_bad_json_names_the_field_line_and_column():
	with pytest.raises(ArgumentsError) as caught:
		merge_arguments("{}", "{\n  \"name\": 'Ada'\n}")
	assert caught.value.field == "argument_overrides"
	assert str(caught.value).startswith("argument_overrides is not valid JSON (line 2, column 11: ")
	assert '{"company": "ACME", "dry_run": false}' in str(caught.value)


def test_not_an_object_says_what_it_is_in_json_words():
	with pytest.raises(
		ArgumentsError, match=r"^arguments must be a JSON object of keyword arguments, not an array; wrap it"
	):
		parse_arguments('["Ada"]')


@pytest.mark.parametrize(
	"value, words",
	[
		(None, "null"),
		(True, "a boolean"),
		(3, "a number"),
		(2.5, "a number"),
		("x", "a string"),
		([], "an array"),
		({}, "an object"),
	],
)
def test_json_type(value, words):
	assert json_type(value) == words
