"""Commands the listener must refuse: one log line each, an error reply only to a
valid response key, no other write, and the listener keeps serving."""

from __future__ import annotations

import json
import logging
import uuid

import pytest

from btu.shared import protocol
from tests.engine.helpers import wait_until
from tests.rpc.support import foreign_keys, raw_ping, settle
from tests.support.keys import KEYS
from tests.support.slack import patient

pytestmark = pytest.mark.versions

PREFIX = "btu:scheduler:rpc:"


def response_key() -> str:
	return f"{PREFIX}{uuid.uuid4().hex}"


def message(**fields) -> bytes:
	return json.dumps(fields).encode()


# (case id, payload builder(key) -> bytes, request_type echoed in the error, words the reason must hold)
REPLIED = [
	(
		"oversized",
		lambda k: message(request_type="ping", request_content="x" * 70_000, response_key=k),
		"ping",
		["65536"],
	),
	(
		"missing request_type",
		lambda k: message(request_content=None, response_key=k),
		None,
		["request_type is missing", "ping"],
	),
	("null request_type", lambda k: message(request_type=None, response_key=k), None, ["request_type is missing"]),
	(
		"unknown request_type",
		lambda k: message(request_type="reload", request_content=None, response_key=k),
		None,
		["'reload'", "unknown", "cancel_task_schedule"],
	),
	("numeric request_type", lambda k: message(request_type=1, response_key=k), None, ["1", "unknown"]),
	(
		"content not a string",
		lambda k: message(request_type="cancel_task_schedule", request_content=3, response_key=k),
		"cancel_task_schedule",
		["request_content", "string", "number"],
	),
	(
		"content missing",
		lambda k: message(request_type="create_task_schedule", response_key=k),
		"create_task_schedule",
		["request_content", "string", "null"],
	),
	(
		"content empty",
		lambda k: message(request_type="create_task_schedule", request_content=" ", response_key=k),
		"create_task_schedule",
		["must not be empty"],
	),
	(
		"content too long",
		lambda k: message(request_type="cancel_task_schedule", request_content="T" * 141, response_key=k),
		"cancel_task_schedule",
		["141", "140"],
	),
	(
		"content with control characters",
		lambda k: message(request_type="cancel_task_schedule", request_content="TS-1\n", response_key=k),
		"cancel_task_schedule",
		["control characters"],
	),
	(
		"ping content not a string",
		lambda k: message(request_type="ping", request_content=[1], response_key=k),
		"ping",
		["ping", "null", "array"],
	),
	(
		"site not a string",
		lambda k: message(request_type="cancel_task_schedule", request_content="TS-000001", site=7, response_key=k),
		"cancel_task_schedule",
		["site", "string"],
	),
	(
		"unknown site",
		lambda k: message(
			request_type="cancel_task_schedule", request_content="TS-000001", site="nosuch.localhost", response_key=k
		),
		"cancel_task_schedule",
		["'nosuch.localhost'", "not a site"],
	),
	(
		"unknown schedule",
		lambda k: message(request_type="cancel_task_schedule", request_content="TS-999999", response_key=k),
		"cancel_task_schedule",
		["'TS-999999'", "site1.localhost"],
	),
	(
		"schedule of another site",
		lambda k: message(
			request_type="create_task_schedule", request_content="TS-000002", site="site2.localhost", response_key=k
		),
		"create_task_schedule",
		["'TS-000002'", "site2.localhost"],
	),
]

UNANSWERABLE = [
	("not JSON", b"{request_type: ping"),
	("not UTF-8", b'{"request_type": "ping", "x": "\xff\xfe"}'),
	("JSON array", b'["ping", null, "btu:scheduler:rpc:abc"]'),
	("JSON string", b'"ping"'),
	("JSON null", b"null"),
	("empty", b""),
	("deeply nested", b"[" * 50_000 + b"]" * 50_000),
	("missing response_key", message(request_type="ping", request_content=None)),
	("null response_key", message(request_type="ping", request_content=None, response_key=None)),
	("numeric response_key", message(request_type="ping", request_content=None, response_key=5)),
	("response_key outside the prefix", message(request_type="ping", request_content=None, response_key="victim:key")),
	(
		"response_key is the command list",
		message(request_type="ping", request_content=None, response_key=KEYS.commands),
	),
	("response_key is a state key", message(request_type="ping", request_content=None, response_key="btu:due")),
	("response_key is only the prefix", message(request_type="ping", request_content=None, response_key=PREFIX)),
	("response_key too long", message(request_type="ping", request_content=None, response_key=PREFIX + "a" * 300)),
	(
		"response_key with a prefix-like start",
		message(request_type="ping", request_content=None, response_key="btu:scheduler:rpcx:1"),
	),
	("oversized beyond parsing", b'{"response_key": "btu:scheduler:rpc:big", "x": "' + b"x" * 2_000_000 + b'"}'),
]


def rejected_lines(caplog) -> list[logging.LogRecord]:
	return [record for record in caplog.records if record.getMessage() == "rpc_rejected"]


@pytest.mark.parametrize("case, build, request_type, words", REPLIED, ids=[case[0] for case in REPLIED])
def test_refused_command_gets_an_error_reply(listener, r, caplog, case, build, request_type, words):
	caplog.set_level(logging.INFO, logger="btu.scheduler_daemon.rpc.listener")
	key = response_key()
	r.lpush(KEYS.commands, build(key))
	answer = r.blpop([key], timeout=patient(5))
	assert answer is not None, f"{case}: no error reply"
	reply = json.loads(answer[1])
	assert set(reply) == {"status", "request_type", "message"}
	assert reply["status"] == "error"
	assert reply["request_type"] == request_type
	for word in words:
		assert word in reply["message"], (word, reply["message"])
	assert raw_ping(r)["status"] == "ok"
	settle(r, listener.dispatcher)
	assert 0 < r.ttl(key) <= 60 or not r.exists(key)
	assert foreign_keys(r) == []
	assert listener.dispatcher.schedules() == [], "a refused command reached execute"
	lines = rejected_lines(caplog)
	assert len(lines) == 1
	assert lines[0].btu_fields["reason"] == reply["message"] and lines[0].btu_fields["replied"] is True


@pytest.mark.parametrize("case, payload", UNANSWERABLE, ids=[case[0] for case in UNANSWERABLE])
def test_refused_command_without_valid_response_key_writes_nothing(listener, r, caplog, case, payload):
	caplog.set_level(logging.INFO, logger="btu.scheduler_daemon.rpc.listener")
	r.set("victim:key", "untouched")
	before = {key: r.dump(key) for key in r.keys("*")}
	r.lpush(KEYS.commands, payload)
	assert raw_ping(r)["status"] == "ok"
	settle(r, listener.dispatcher)
	after = {key: r.dump(key) for key in r.keys("*") if not key.startswith(PREFIX.encode())}
	assert after == before, f"{case}: keys changed outside {PREFIX}*"
	assert not r.exists(PREFIX + "big") and not r.exists(PREFIX)
	assert r.keys(PREFIX + "*") == [], "an error reply was written although no valid response key was given"
	assert listener.dispatcher.schedules() == []
	lines = rejected_lines(caplog)
	assert len(lines) == 1, f"{case}: expected one log line, got {[line.btu_fields for line in lines]}"
	assert lines[0].btu_fields["replied"] is False
	assert listener.thread.is_alive()


def test_reply_key_holding_another_type_costs_one_command_only(listener, r, caplog):
	caplog.set_level(logging.INFO, logger="btu.scheduler_daemon.rpc.listener")
	key = response_key()
	r.set(key, "a string, not a list")
	r.lpush(
		KEYS.commands,
		message(request_type="cancel_task_schedule", request_content="TS-000005", response_key=key),
	)
	settle(r, listener.dispatcher)
	assert r.get(key) == b"a string, not a list"
	assert [record.getMessage() for record in caplog.records].count("rpc_ack_failed") == 1
	# The command was valid, so it is still carried out although its ACK could not be written.
	assert listener.dispatcher.schedules() == ["TS-000005"]


def test_a_lone_surrogate_response_key_costs_no_other_reply(listener, r, caplog):
	"""JSON may escape a lone surrogate, which no Redis key can hold: that command gets no reply,
	and the ping popped in the same batch is still ACKed."""
	caplog.set_level(logging.INFO, logger="btu.scheduler_daemon.rpc.listener")
	bad_key = PREFIX + "\ud800"
	with r.pipeline(transaction=False) as pipe:
		pipe.lpush(KEYS.commands, json.dumps({"request_type": "ping", "response_key": bad_key}))
		pipe.lpush(KEYS.commands, json.dumps({"request_type": "ping", "response_key": response_key() + "\udfff"}))
		good_key = response_key()
		pipe.lpush(KEYS.commands, json.dumps({"request_type": "ping", "response_key": good_key}))
		pipe.execute()
	answer = r.blpop([good_key], timeout=patient(5))
	assert answer is not None and json.loads(answer[1])["status"] == "ok"
	lines = rejected_lines(caplog)
	assert len(lines) == 2 and all(line.btu_fields["replied"] is False for line in lines)
	assert "UTF-8" in lines[0].btu_fields["reason"]


def test_a_dispatcher_failing_to_check_gets_an_error_reply(start_listener, r, caplog):
	from tests.rpc.support import RecordingDispatcher

	class Broken(RecordingDispatcher):
		def check_targets(self, site, request_type, names):
			raise ConnectionError("database down")

	start_listener(Broken())
	key = response_key()
	r.lpush(
		KEYS.commands,
		message(request_type="cancel_task_schedule", request_content="TS-000001", response_key=key),
	)
	reply = json.loads(r.blpop([key], timeout=patient(5))[1])
	assert reply["status"] == "error" and "database down" in reply["message"] and "try again" in reply["message"]
	assert raw_ping(r)["status"] == "ok"


def test_execute_errors_are_logged_and_the_loop_goes_on(start_listener, r, caplog):
	from tests.rpc.support import RecordingDispatcher

	class Failing(RecordingDispatcher):
		def execute(self, site, names):
			super().execute(site, names)
			raise RuntimeError(f"cannot execute {', '.join(names)}")

	running = start_listener(Failing())
	caplog.set_level(logging.INFO, logger="btu.scheduler_daemon.rpc.listener")
	for n in (1, 2, 3):
		assert protocol.call(r, KEYS, protocol.CREATE_TASK_SCHEDULE, f"TS-00000{n}").ok
	settle(r, running.dispatcher)

	def failures():
		return [record for record in caplog.records if record.getMessage() == "rpc_execute_failed"]

	# settle() returns once the marker is recorded, which is just before its own failure is logged.
	wait_until(lambda: len(failures()) >= 4, 5, "the marker's failure logged")
	failures = failures()
	assert [record.btu_fields["schedules"] for record in failures] == [
		"TS-000001",
		"TS-000002",
		"TS-000003",
		"TS-SETTLE",
	]
	assert [record.btu_fields["site"] for record in failures][:3] == ["site1.localhost"] * 3
	assert running.thread.is_alive()


def test_a_flood_of_bad_commands_is_logged_in_a_few_lines_and_every_one_is_answered(start_listener, r, caplog):
	"""2,000 refused commands (forged schedule names, bad types, unanswerable bytes): at most the limit of
	rpc_rejected lines per window, then one line with the count of the rest; every answerable one gets its error."""
	caplog.set_level(logging.INFO, logger="btu.scheduler_daemon.rpc.listener")
	start_listener(rejection_log_limit=20, rejection_log_window=3.0)
	keys = []
	with r.pipeline(transaction=False) as pipe:
		for n in range(2000):
			if n % 4 == 3:
				pipe.lpush(KEYS.commands, b"{not json %d" % n)
				continue
			key = response_key()
			keys.append(key)
			payload = (
				message(request_type="cancel_task_schedule", request_content=f"TS-X{n}", response_key=key),
				message(request_type=f"reload{n}", response_key=key),
				message(request_type="create_task_schedule", request_content=f"TS-{n}\t", response_key=key),
			)[n % 4]
			pipe.lpush(KEYS.commands, payload)
		pipe.execute()
	for key in keys:
		answer = r.blpop([key], timeout=patient(5))
		assert answer is not None and json.loads(answer[1])["status"] == "error"
	assert len(rejected_lines(caplog)) == 20
	wait_until(
		lambda: [record for record in caplog.records if record.getMessage() == "rpc_rejected_suppressed"],
		10,
		"the count of the rejections not logged, once the window is over",
	)
	[summary] = [record for record in caplog.records if record.getMessage() == "rpc_rejected_suppressed"]
	assert summary.btu_fields["count"] == 2000 - 20 and summary.btu_fields["window_secs"] == 3.0
	assert raw_ping(r)["status"] == "ok"
