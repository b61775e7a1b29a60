"""The firing scripts report only the outcomes `store/outcomes.py` names, and it names only those.

Read from each script's own source: the strings on a line that sets, tests or collects an outcome or fills the
script's results, and those a `return` hands back, when one is an outcome's spelling (`'<word>'`, or `'<word>: '`
before a reason). A script that starts reporting a string the enums do not know fails here, before Python meets it
in Redis, a log line or a metric.
"""

from __future__ import annotations

import io
import json
import logging
import re
from importlib import resources

import pytest

from btu.scheduler_daemon.log import JsonFormatter, TextFormatter, log_event
from btu.scheduler_daemon.store.outcomes import FireOutcome, ItemOutcome, JobOutcome
from btu.scheduler_daemon.store.state import ItemResult, Release, Released

# How a str Enum member prints changed with Python's version (3.11 formats a plain one as "Class.MEMBER").
pytestmark = pytest.mark.versions

LUA = resources.files("btu.scheduler_daemon.store").joinpath("lua")
# A script and the enums of what it reports.
SCRIPTS = {"prepare": (ItemOutcome, JobOutcome), "release": (FireOutcome,)}
# Lua's comments and quoted strings, in the order they start: a quote inside a comment is no string.
TOKEN = re.compile(r"""--.*|'((?:\\.|[^'\\])*)'|"((?:\\.|[^"\\])*)\"""")
OUTCOME_LINE = re.compile(r"\boutcomes?\b|\bresults\[|^\s*return\s+'")
SPELLING = re.compile(r"([a-z_]+)(?:: ?)?")


def code_and_strings(line: str) -> tuple[str, list[str]]:
	"""A line's code before its comment, and its strings there."""
	strings = []
	for token in TOKEN.finditer(line):
		if token.group().startswith("--"):
			return line[: token.start()], strings
		strings.append(token.group(1) if token.group(1) is not None else token.group(2))
	return line, strings


def reported_in(line: str) -> set[str]:
	"""The outcome spellings of one line of Lua: none unless its code handles an outcome or the results."""
	code, strings = code_and_strings(line)
	if not OUTCOME_LINE.search(code):
		return set()
	return {match.group(1) for text in strings if (match := SPELLING.fullmatch(text))}


def reported(name: str) -> set[str]:
	"""The outcome spellings of the script's own lines (not those of the shared files it uses)."""
	return set().union(*(reported_in(line) for line in LUA.joinpath(f"{name}.lua").read_text().splitlines()))


def values(enums) -> set[str]:
	return {member.value for enum in enums for member in enum}


def test_the_reader_finds_what_a_script_line_reports():
	assert reported_in("outcome = 'skipped_x'") == {"skipped_x"}
	assert reported_in("results[at] = 'push_x: ' .. queue") == {"push_x"}
	assert reported_in("if string.sub(results[r + 1], 1, 7) ~= 'push_x:' then") == {"push_x"}
	assert reported_in("\treturn 'quarantined_x: ' .. reason") == {"quarantined_x"}
	assert reported_in("outcomes[#outcomes + 1] = failed and 'failed_x' or 'prepared_x'") == {"failed_x", "prepared_x"}
	# Not an outcome: a comment, a key or command, a reason, a line that handles no outcome.
	assert reported_in("ids[#ids + 1] = n + 2 -- its outcome stands in results as 'x'") == set()
	assert reported_in("outcome = quarantined(member, 'job ' .. job_key .. ': ' .. err)") == set()
	assert reported_in("try('ZREM', KEYS[2], results[r])") == set()
	assert reported_in("try('HSET', job_key, 'status', 'queued', 'enqueued_at', stamp)") == set()
	assert reported_in("\treturn 'not nine tab-separated fields'") == set()


@pytest.mark.parametrize("name", SCRIPTS)
def test_a_firing_script_reports_exactly_the_outcomes_its_enums_name(name):
	# ItemOutcome.WRITTEN, ItemResult's name for an item answered with its jobs' list, spells JobOutcome.PREPARED.
	found, known = reported(name), values(SCRIPTS[name])
	assert found - known == set(), f"lua/{name}.lua reports outcomes outcomes.py does not name"
	assert known - found == set(), f"outcomes.py names outcomes lua/{name}.lua never reports"


def test_no_other_script_reports_an_outcome():
	others = sorted(entry.name for entry in LUA.iterdir() if entry.name.endswith(".lua"))
	found = {name: reported(name.removesuffix(".lua")) for name in others if name.removesuffix(".lua") not in SCRIPTS}
	assert {name: outcomes for name, outcomes in found.items() if outcomes} == {}, (
		"name them in outcomes.py and SCRIPTS"
	)


def test_state_reads_the_scripts_answers_as_the_enums_name_them():
	assert ItemResult.of([b"prepared", b"duplicate"]) == ItemResult(
		ItemOutcome.WRITTEN, [JobOutcome.PREPARED, JobOutcome.DUPLICATE]
	)
	assert ItemResult.of(b"failed: OOM command not allowed") == ItemResult(
		ItemOutcome.FAILED, [], "OOM command not allowed"
	)
	assert ItemResult.of(b"stale").outcome == ItemOutcome.STALE
	assert ItemResult.of(b"corrupt").outcome == ItemOutcome.CORRUPT
	refused = Released.of(b"member", b"push_refused: rq:queue:b:default: WRONGTYPE", 3)
	assert (refused.outcome, refused.reason) == (FireOutcome.PUSH_REFUSED, "rq:queue:b:default: WRONGTYPE")
	assert Release.of([b"member", b"push_refused: x", 0], None).push_refused
	assert not Release.of([b"member", b"enqueued", 0], None).push_refused


@pytest.mark.parametrize("member", [*ItemOutcome, *JobOutcome, *FireOutcome], ids=str)
def test_an_outcome_prints_as_the_script_spells_it(member):
	text = member.value
	assert (str(member), f"{member}", "%s" % member, format(member, "")) == (text, text, text, text)
	assert json.dumps({member: [member]}) == json.dumps({text: [text]})
	assert {text: 1}[member] == 1 and {member: 1}[text] == 1
	lines = {}
	for name, formatter in (("text", TextFormatter()), ("json", JsonFormatter())):
		stream = io.StringIO()
		handler = logging.StreamHandler(stream)
		handler.setFormatter(formatter)
		logger = logging.Logger("outcomes", logging.INFO)  # no parent: the line goes to this stream only
		logger.addHandler(handler)
		log_event(logger, logging.INFO, member, outcome=member)
		lines[name] = stream.getvalue()
	assert lines["text"].split(" ", 2)[2] == f"{text} outcome={text}\n"
	assert {key: value for key, value in json.loads(lines["json"]).items() if key != "ts"} == {
		"level": "INFO",
		"event": text,
		"outcome": text,
	}
