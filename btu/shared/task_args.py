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


# Keyword arguments are JSON in a row: a bigger payload belongs in a document the function reads by name.
MAX_ARGUMENTS_CHARS = 64_000
# Deeper nesting is no set of arguments, and Python's parser recurses on it (a RecursionError at a few thousand).
MAX_JSON_DEPTH = 32


def parse_json(text, field: str):
	"""The JSON value in `text`, refused (ArgumentsError naming `field`) when longer than MAX_ARGUMENTS_CHARS, nested
	deeper than MAX_JSON_DEPTH or not JSON; errors give line and column."""
	text = str(text)
	if len(text) > MAX_ARGUMENTS_CHARS:
		raise ArgumentsError(
			field,
			text,
			_("is {length} characters long, more than {limit}; store the data in a document and pass its name"),
			length=len(text),
			limit=MAX_ARGUMENTS_CHARS,
		)
	if nesting(text) > MAX_JSON_DEPTH:
		raise ArgumentsError(
			field,
			text,
			_("nests arrays and objects more than {limit} deep; pass flatter arguments"),
			limit=MAX_JSON_DEPTH,
		)
	try:
		return json.loads(text)
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


def parse_arguments(text: str | None, field: str = "arguments") -> dict:
	"""The JSON object in `text` as keyword arguments (empty or None means {}); bounded and reported as parse_json."""
	if text is None or not str(text).strip():
		return {}
	value = parse_json(text, field)
	if not isinstance(value, dict):
		raise ArgumentsError(
			field,
			text,
			_('must be a JSON object of keyword arguments, not {kind}; wrap it like {{"name": value}}'),
			kind=json_type(value),
		)
	return value


def nesting(text: str) -> int:
	"""How deep arrays and objects nest in JSON `text` (brackets inside strings not counted); counting stops past
	MAX_JSON_DEPTH."""
	depth = deepest = 0
	in_string = escaped = False
	for char in text:
		if in_string:
			if escaped:
				escaped = False
			elif char == "\\":
				escaped = True
			elif char == '"':
				in_string = False
		elif char == '"':
			in_string = True
		elif char in "[{":
			depth += 1
			if depth > deepest:
				deepest = depth
				if deepest > MAX_JSON_DEPTH:
					break
		elif char in "]}":
			depth -= 1
	return deepest


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
