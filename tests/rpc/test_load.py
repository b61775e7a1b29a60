"""A burst of 1,000 commands, a flood naming one schedule, and several listeners sharing one command list."""

from __future__ import annotations

import json
import time
from collections import Counter

import pytest

from btu.shared import protocol
from tests.rpc.support import RecordingDispatcher, settle
from tests.support.keys import KEYS
from tests.support.slack import patient

pytestmark = pytest.mark.versions

ACK_MESSAGE = "Command received by BTU Scheduler."


def push_commands(r, count: int) -> list[tuple[str, str, str]]:
	"""`count` commands in one pipeline: (response key, request type, schedule name)."""
	sent = []
	with r.pipeline(transaction=False) as pipe:
		for n in range(count):
			request_type = (protocol.PING, protocol.CREATE_TASK_SCHEDULE, protocol.CANCEL_TASK_SCHEDULE)[n % 3]
			name = None if request_type == protocol.PING else f"TS-{n + 1:06d}"
			command = protocol.make_command(KEYS, request_type, name)
			sent.append((command["response_key"], request_type, name))
			pipe.lpush(KEYS.commands, json.dumps(command))
		pipe.execute()
	return sent


def test_a_burst_of_1000_commands_gets_1000_acks(listener, r):
	sent = push_commands(r, 1000)
	for key, request_type, _ in sent:
		answer = r.blpop([key], timeout=protocol.CALLER_TIMEOUT_SECONDS)
		assert answer is not None, f"no ACK on {key}"
		assert json.loads(answer[1]) == {"status": "ok", "request_type": request_type, "message": ACK_MESSAGE}
	settle(r, listener.dispatcher)
	assert listener.dispatcher.schedules() == [name for _, _, name in sent if name]


def test_several_listeners_ack_every_command_exactly_once(start_listener, r):
	running = [start_listener(RecordingDispatcher(), name=f"listener-{n}") for n in range(3)]
	sent = push_commands(r, 600)
	deadline = time.monotonic() + patient(30)
	while r.llen(KEYS.commands) and time.monotonic() < deadline:
		time.sleep(0.05)
	for key, request_type, _ in sent:
		answer = r.blpop([key], timeout=protocol.CALLER_TIMEOUT_SECONDS)
		assert answer is not None and json.loads(answer[1])["request_type"] == request_type
	expected = Counter(name for _, _, name in sent if name)
	deadline = time.monotonic() + patient(30)
	while sum(len(each.dispatcher.schedules()) for each in running) < sum(expected.values()):
		assert time.monotonic() < deadline, "not every ACKed command was executed"
		time.sleep(0.01)
	time.sleep(0.2)  # room for a duplicate execution to show up
	assert all(r.llen(key) == 0 for key, _, _ in sent), "a command was ACKed more than once"
	executed = Counter(name for each in running for name in each.dispatcher.schedules())
	assert executed == expected
	takers = [len(each.dispatcher.schedules()) for each in running]
	assert sum(1 for count in takers if count) >= 2, f"one listener took everything: {takers}"
	assert all(each.thread.is_alive() for each in running)


def test_a_flood_naming_one_schedule_costs_one_check_and_one_execution_per_batch(listener, r):
	"""5,000 valid commands, nearly all naming one schedule: each gets its ACK, but checks and executions follow the
	batches."""
	sent = []
	with r.pipeline(transaction=False) as pipe:
		for n in range(5000):
			site, name = ("site2.localhost", "TS-900000") if n % 50 == 0 else (None, "TS-000001")
			command = protocol.make_command(
				KEYS, (protocol.CREATE_TASK_SCHEDULE, protocol.CANCEL_TASK_SCHEDULE)[n % 2], name, site=site
			)
			sent.append(command["response_key"])
			pipe.lpush(KEYS.commands, json.dumps(command))
		pipe.execute()
	for key in sent:
		answer = r.blpop([key], timeout=protocol.CALLER_TIMEOUT_SECONDS)
		assert answer is not None and json.loads(answer[1])["status"] == "ok"
	settle(r, listener.dispatcher)
	dispatcher = listener.dispatcher
	executed = Counter(dispatcher.schedules())
	assert set(executed) == {"TS-000001", "TS-900000"}
	assert executed["TS-000001"] <= 500 and executed["TS-900000"] <= 100, f"a flood is executed per command: {executed}"
	assert dispatcher.checks <= 500, f"{dispatcher.checks} dispatcher checks for 5,000 commands"
	assert all(len(names) == len(set(names)) for _, names in dispatcher.calls), "a schedule twice in one execution"


def test_each_site_is_executed_at_the_place_of_its_last_command(listener, r):
	"""Whatever is executed after a command in the batch is also executed after that command."""
	commands = [
		protocol.make_command(KEYS, protocol.CREATE_TASK_SCHEDULE, "TS-000001", site="site2.localhost"),
		protocol.make_command(KEYS, protocol.CREATE_TASK_SCHEDULE, "TS-000002", site="site1.localhost"),
		protocol.make_command(KEYS, protocol.CANCEL_TASK_SCHEDULE, "TS-900000", site="site2.localhost"),
		protocol.make_command(KEYS, protocol.CANCEL_TASK_SCHEDULE, "TS-000001", site="site2.localhost"),
	]
	listener.listener.handle([json.dumps(command).encode() for command in commands])
	assert listener.dispatcher.calls == [
		("site1.localhost", ["TS-000002"]),
		("site2.localhost", ["TS-000001", "TS-900000"]),
	]
