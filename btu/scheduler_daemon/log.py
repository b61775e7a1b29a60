"""The scheduler's logging: one line per event, as text or JSON.

Text: ``2026-11-22T02:33:01.123Z INFO fire site=s1 schedule=TS-000001 lag_ms=1.2``
(a value with spaces, quotes, ``=`` or newlines is JSON-quoted, so a line never
breaks). JSON: ``{"ts": ..., "level": ..., "event": ..., **fields}``.
Every part of the scheduler logs through `log_event`.
"""

from __future__ import annotations

import json
import logging
import sys
import time
import traceback
from typing import Any, TextIO

from btu.shared.redis_urls import mask_url

FIELDS_ATTR = "btu_fields"
RESERVED = ("ts", "level", "event")


def log_event(logger: logging.Logger | str, level: int | str, event: str, exc_info: Any = None, **fields: Any) -> None:
	"""Log `event` with `fields` (site, schedule, slot, ...) as one line."""
	if isinstance(logger, str):
		logger = logging.getLogger(logger)
	if isinstance(level, str):
		level = logging.getLevelName(level.upper())
	if logger.isEnabledFor(level):
		logger.log(level, event, exc_info=exc_info, extra={FIELDS_ATTR: fields})


def timestamp(created: float) -> str:
	seconds = int(created)
	millis = int((created - seconds) * 1000)
	return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(seconds)) + f".{millis:03d}Z"


def record_fields(record: logging.LogRecord) -> dict[str, Any]:
	"""The event's fields, with the password of any URL in them masked (an error may quote a Redis URL)."""
	fields = dict(getattr(record, FIELDS_ATTR, None) or {})
	if record.exc_info and record.exc_info[0] is not None:
		fields["traceback"] = "".join(traceback.format_exception(*record.exc_info)).rstrip()
	for key, value in fields.items():
		if isinstance(value, str) and "://" in value:
			fields[key] = mask_url(value)
	return fields


def text_value(value: Any) -> str:
	if value is None:
		return "null"
	if isinstance(value, bool):
		return "true" if value else "false"
	text = str(value)
	if not text or any(ch.isspace() or ch in '"=' for ch in text) or not text.isprintable():
		return json.dumps(text)
	return text


class TextFormatter(logging.Formatter):
	def format(self, record: logging.LogRecord) -> str:
		parts = [timestamp(record.created), record.levelname, text_value(record.getMessage())]
		parts.extend(f"{key}={text_value(value)}" for key, value in record_fields(record).items())
		return " ".join(parts)


class JsonFormatter(logging.Formatter):
	def format(self, record: logging.LogRecord) -> str:
		line = {"ts": timestamp(record.created), "level": record.levelname, "event": record.getMessage()}
		for key, value in record_fields(record).items():
			line[f"field_{key}" if key in RESERVED else key] = value
		text = json.dumps(line, default=str, ensure_ascii=False)
		try:
			text.encode("utf-8")
		except UnicodeEncodeError:  # a lone surrogate from a caller's JSON: escape it, or the stream drops the line
			return json.dumps(line, default=str)
		return text


FORMATTERS = {"text": TextFormatter, "json": JsonFormatter}


class EventHandler(logging.StreamHandler):
	"""The handler `configure` installs; replaced, never stacked, by a later `configure`."""


def configure(level: str | int = "INFO", fmt: str = "text", stream: TextIO | None = None) -> logging.Handler:
	"""Send every log record of the process to `stream` (stderr) at `level`, in `fmt`."""
	if fmt not in FORMATTERS:
		raise ValueError(f"log format {fmt!r}: allowed are {', '.join(FORMATTERS)}")
	root = logging.getLogger()
	for handler in list(root.handlers):
		if isinstance(handler, EventHandler):
			root.removeHandler(handler)
	handler = EventHandler(stream if stream is not None else sys.stderr)
	handler.setFormatter(FORMATTERS[fmt]())
	root.addHandler(handler)
	root.setLevel(level.upper() if isinstance(level, str) else level)
	return handler
