"""One line per event, as text or JSON."""

from __future__ import annotations

import json
import logging
import re

import pytest

from btu.scheduler_daemon.log import configure, log_event

pytestmark = pytest.mark.versions

TEXT_LINE = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z (?P<level>[A-Z]+) (?P<rest>.*)$")


def test_text_line(log_stream):
	configure("INFO", "text", stream=log_stream)
	log_event(
		logging.getLogger("btu.test"),
		logging.INFO,
		"fire",
		site="s1",
		schedule="TS-000001",
		slot="2026-11-22T02:33:01Z",
		lag_ms=1.2,
	)
	line = log_stream.getvalue()
	assert line.endswith("\n") and line.count("\n") == 1
	match = TEXT_LINE.match(line.rstrip("\n"))
	assert match and match["level"] == "INFO"
	assert match["rest"] == "fire site=s1 schedule=TS-000001 slot=2026-11-22T02:33:01Z lag_ms=1.2"


def test_text_quotes_values_that_would_break_the_line(log_stream):
	configure("DEBUG", "text", stream=log_stream)
	log_event(
		"btu.test", "warning", "rpc_rejected", reason='not JSON: "x"', content="a\nb", empty="", none=None, flag=True
	)
	line = log_stream.getvalue()
	assert line.count("\n") == 1
	rest = TEXT_LINE.match(line.rstrip("\n"))["rest"]
	assert rest == 'rpc_rejected reason="not JSON: \\"x\\"" content="a\\nb" empty="" none=null flag=true'


def test_json_line_and_traceback_on_one_line(log_stream):
	configure("INFO", "json", stream=log_stream)
	try:
		1 / 0
	except ZeroDivisionError:
		log_event("btu.test", logging.ERROR, "rpc_execute_failed", exc_info=True, site="s1", ts="clash")
	lines = log_stream.getvalue().splitlines()
	assert len(lines) == 1
	record = json.loads(lines[0])
	assert list(record)[:3] == ["ts", "level", "event"]
	assert record["level"] == "ERROR" and record["event"] == "rpc_execute_failed" and record["site"] == "s1"
	assert record["field_ts"] == "clash" and re.match(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$", record["ts"])
	assert "ZeroDivisionError" in record["traceback"]


def test_level_filters_and_configure_replaces_its_handler(log_stream):
	configure("WARNING", "text", stream=log_stream)
	configure("WARNING", "text", stream=log_stream)
	log_event("btu.test", logging.INFO, "hidden")
	log_event("btu.test", logging.WARNING, "shown")
	assert log_stream.getvalue().count("shown") == 1 and "hidden" not in log_stream.getvalue()


def test_unknown_format_is_refused():
	with pytest.raises(ValueError, match="'xml'"):
		configure("INFO", "xml")


def test_json_line_escapes_a_lone_surrogate(log_stream):
	"""A caller's JSON may carry "\\ud800"; the line must still be writable as UTF-8."""
	configure("INFO", "json", stream=log_stream)
	log_event("btu.test", logging.WARNING, "rpc_rejected", response_key="btu:scheduler:rpc:\ud800", site="café")
	line = log_stream.getvalue().rstrip("\n")
	line.encode("utf-8")
	record = json.loads(line)
	assert record["response_key"] == "btu:scheduler:rpc:\ud800" and record["site"] == "café"
