"""Task arguments as both halves read them: a JSON object of keyword arguments on the Task, overridden per Schedule.

Errors are `ArgumentsError` (an InputError) whose text names the field, what is wrong and the fix; each caller
wraps it in its own error: the scheduler's RowError with `str(exc)`, the Frappe side's TaskInputError translated.
"""

from __future__ import annotations

import json

from btu.shared.messages import InputError, _


class ArgumentsError(InputError):
	"""Arguments that are not a JSON object; `field` is the field they came from, `value` their text."""

	# "arguments is not valid JSON (...)": the text itself is not shown, it can be long.
	layout = _("{field} {problem}")


def parse_arguments(text: str | None, field: str = "arguments") -> dict:
	"""The JSON object in `text` as keyword arguments (empty or None means {}); errors give line and column."""
	if text is None or not str(text).strip():
		return {}
	try:
		value = json.loads(text)
	except ValueError as exc:  # a JSONDecodeError, or a UnicodeDecodeError for bytes
		# The parser's own words, in English as Python writes them.
		where = (
			f"line {exc.lineno}, column {exc.colno}: {exc.msg}" if isinstance(exc, json.JSONDecodeError) else str(exc)
		)
		raise ArgumentsError(
			field,
			text,
			_(
				'is not valid JSON ({where}); write a JSON object such as {{"company": "ACME", "dry_run": false}} '
				"(double quotes, true/false/null in lower case, no trailing commas)"
			),
			where=where,
		) from None
	if not isinstance(value, dict):
		raise ArgumentsError(
			field,
			text,
			_('must be a JSON object of keyword arguments, not {kind}; wrap it like {{"name": value}}'),
			kind=json_type(value),
		)
	return value


def merge_arguments(task_arguments: str | None, overrides: str | None) -> dict:
	"""The Task's arguments with the Schedule's argument_overrides merged over them (one level)."""
	return {**parse_arguments(task_arguments, "arguments"), **parse_arguments(overrides, "argument_overrides")}


def json_type(value) -> str:
	"""What a JSON value is, in JSON's words with an article: "null", "a boolean", "an array", ..."""
	if value is None:
		return "null"
	return {
		bool: "a boolean",
		int: "a number",
		float: "a number",
		str: "a string",
		list: "an array",
		dict: "an object",
	}.get(type(value), type(value).__name__)
