"""The original BTU's `arguments` and `argument_overrides`: Python literals (read with ast.literal_eval) as JSON."""

from __future__ import annotations

import ast
import json
import math

from btu.shared.messages import InputError, _


class LiteralError(InputError):
	"""A value that is neither a JSON object nor a Python literal dict of JSON values; kept as it is and listed."""

	layout = _("{field} {problem}")


def to_json(field: str, text: str | None) -> str | None:
	"""`text` as a JSON object; None when it is empty or already one (nothing to change).

	The original parsed a Python dict literal (`{'days': 3, 'dry_run': True}`); its one-shot helper wrote JSON,
	which this BTU reads as is. Raises LiteralError naming `field` when the text is neither.
	"""
	if text is None or not str(text).strip():
		return None
	try:
		if isinstance(json.loads(text), dict):
			return None
	except ValueError:
		pass
	try:
		value = ast.literal_eval(str(text).strip())
	except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError) as exc:
		raise LiteralError(
			field,
			text,
			_("is neither JSON nor a Python literal ({reason}); rewrite it as a JSON object such as {example}"),
			reason=f"{type(exc).__name__}: {exc}",
			example='{"days": 3}',
		) from None
	if not isinstance(value, dict):
		raise LiteralError(
			field,
			text,
			_("is a Python {kind}, not a dict of keyword arguments; rewrite it as a JSON object such as {example}"),
			kind=type(value).__name__,
			example='{"days": 3}',
		)
	_check_json(field, text, value)
	return json.dumps(value, ensure_ascii=False)


def _check_json(field: str, text: str, value) -> None:
	"""Refuse what JSON would change: non-string keys, sets, bytes, complex numbers, NaN."""
	if isinstance(value, dict):
		for key, item in value.items():
			if not isinstance(key, str):
				raise LiteralError(
					field, text, _("has the key {key!r}, not a name; JSON keeps only string keys: rename it"), key=key
				)
			_check_json(field, text, item)
	elif isinstance(value, (list, tuple)):
		for item in value:
			_check_json(field, text, item)
	elif isinstance(value, float) and not math.isfinite(value):
		raise LiteralError(
			field, text, _("holds {number}, which JSON cannot write; replace it with a number or null"), number=value
		)
	elif value is not None and not isinstance(value, (str, int, float, bool)):
		raise LiteralError(
			field,
			text,
			_("holds a {kind} ({item!r}), which JSON cannot write; use a list, string or number"),
			kind=type(value).__name__,
			item=value,
		)
