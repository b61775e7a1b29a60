"""The listener against the protocol document, spoken in raw Redis commands.

Every key, field, TTL and ordering of shared/seeds/000 (BTU Scheduler: Redis
RPC Control Protocol): command list btu:scheduler:commands (caller LPUSH,
scheduler BRPOP), reply list btu:scheduler:rpc:{uuid} (scheduler LPUSH, then
EXPIRE 60), the exact ACK, pushed before execution, and the caller's 5 s BLPOP.
"""

from __future__ import annotations

import json
import logging
import threading
import time
import uuid

import pytest
import redis

from btu.scheduler_daemon.operations.config import Config
from btu.scheduler_daemon.rpc.listener import BLOCK_SECONDS, CommandListener, start_listener_thread
from btu.shared import protocol
from tests.engine.helpers import wait_until
from tests.rpc.support import DEFAULT_SITE, Monitor, RecordingDispatcher, raw_ping, settle
from tests.support.keys import KEYS
from tests.support.redis_server import RedisServer
from tests.support.slack import patient

pytestmark = pytest.mark.versions

ACK_MESSAGE = "Command received by BTU Scheduler."


def command(request_type: str, content: str | None = None, key: str | None = None, **extra) -> tuple[str, str]:
	key = key or f"btu:scheduler:rpc:{uuid.uuid4().hex}"
	return key, json.dumps({"request_type": request_type, "request_content": content, "response_key": key, **extra})


@pytest.mark.parametrize(
	"request_type, content",
	[("ping", None), ("create_task_schedule", "TS-000003"), ("cancel_task_schedule", "TS-000003")],
)
def test_ack_is_exactly_the_documented_json(listener, r, request_type, content):
	key, message = command(request_type, content)
	r.lpush("btu:scheduler:commands", message)
	answer = r.blpop([key], timeout=patient(5))
	assert answer is not None, "no ACK within the caller's 5 s"
	assert answer[0] == key.encode()
	ack = json.loads(answer[1])
	assert ack == {"status": "ok", "request_type": request_type, "message": ACK_MESSAGE}
	assert list(ack) == ["status", "request_type", "message"]


def test_reply_list_holds_one_ack_and_expires_in_60_s(r, start_listener):
	"""Observed at the start of execution: the ACK is already on the response key, with its TTL."""
	keys = {}

	def observe(site, names):
		key = keys[names[0]]
		return {"items": r.lrange(key, 0, -1), "ttl": r.ttl(key), "type": r.type(key)}

	running = start_listener(RecordingDispatcher(observer=observe))
	key, message = command("cancel_task_schedule", "TS-000003")
	keys["TS-000003"] = key
	r.lpush("btu:scheduler:commands", message)
	wait_until(lambda: running.dispatcher.executed, 10, "execution", 0.01)
	observed = running.dispatcher.executed[0]["observed"]
	assert observed["type"] == b"list"
	assert [json.loads(item) for item in observed["items"]] == [
		{"status": "ok", "request_type": "cancel_task_schedule", "message": ACK_MESSAGE}
	]
	assert 55 <= observed["ttl"] <= 60
	# Unread, the reply stays until its TTL cleans it up.
	assert r.llen(key) == 1
	assert 0 < r.pttl(key) <= 60_000
	assert r.llen("btu:scheduler:commands") == 0


def test_ack_arrives_before_a_slow_execution(r, start_listener):
	running = start_listener(RecordingDispatcher(delay=2.0))
	key, message = command("create_task_schedule", "TS-000007")
	pushed = time.perf_counter()
	r.lpush("btu:scheduler:commands", message)
	answer = r.blpop([key], timeout=patient(5))
	acked = time.perf_counter()
	assert answer is not None
	assert json.loads(answer[1])["status"] == "ok"
	assert running.dispatcher.executed == [], "execution finished before the caller had its ACK"
	assert acked - pushed < 1.0, f"ACK took {acked - pushed:.3f} s although execution takes 2 s"
	record = wait_until(lambda: running.dispatcher.executed, 10, "execution", 0.01)[0]
	assert record["name"] == "TS-000007" and record["site"] == DEFAULT_SITE
	assert record["finished"] - record["started"] >= 2.0
	assert record["finished"] > acked


def test_waiting_commands_are_all_acked_before_a_slow_execution(r, start_listener):
	"""Commands already queued get their ACKs together, before the first (slow) execution."""
	running = start_listener(RecordingDispatcher(delay=1.0))
	batch = [command("create_task_schedule", f"TS-{n:06d}") for n in range(31, 36)]
	r.lpush("btu:scheduler:commands", *(message for _, message in batch))
	for key, _ in batch:
		assert r.blpop([key], timeout=patient(5)) is not None
	assert running.dispatcher.executed == [], "an execution finished before all waiting commands were ACKed"
	wait_until(lambda: len(running.dispatcher.executed) == 5, 10, "five executions", 0.01)
	assert running.dispatcher.schedules() == [f"TS-{n:06d}" for n in range(31, 36)]


def test_listener_without_batch_pop_serves_the_same(r, start_listener):
	"""drain_count=1 is what a Redis older than 6.2 (no RPOP count) falls back to."""
	running = start_listener(drain_count=1)
	keys = []
	for n in range(40, 50):
		key, message = command("cancel_task_schedule", f"TS-{n:06d}")
		keys.append(key)
		r.lpush("btu:scheduler:commands", message)
	assert all(json.loads(r.blpop([key], timeout=patient(5))[1])["status"] == "ok" for key in keys)
	settle(r, running.dispatcher)
	assert running.dispatcher.schedules() == [f"TS-{n:06d}" for n in range(40, 50)]


def test_listener_writes_lpush_then_expire_60_and_nothing_else(redis_server, r, start_listener):
	"""MONITOR shows the listener's own commands: BRPOP, then LPUSH and EXPIRE 60 on the response key."""
	# The listener's connection is told by its name, not by being the only other client: clients
	# that earlier tests dropped may still be on the server.
	name = f"listener-{uuid.uuid4().hex[:8]}"
	running = start_listener(client=redis_server.client(client_name=name))
	raw_ping(r)
	listener_addrs = {c["addr"] for c in r.client_list() if c.get("name") == name}
	assert listener_addrs, "the listener's named connection is on the server"
	monitor = Monitor("127.0.0.1", redis_server.port)
	time.sleep(0.2)
	key, message = command("cancel_task_schedule", "TS-000004")
	bad_key, bad_message = command("cancel_task_schedule", "not-a-schedule")
	r.lpush("btu:scheduler:commands", message)
	r.lpush("btu:scheduler:commands", bad_message)
	assert json.loads(r.blpop([key], timeout=patient(5))[1])["status"] == "ok"
	assert json.loads(r.blpop([bad_key], timeout=patient(5))[1])["status"] == "error"
	seen = [args for addr, args in monitor.close() if addr in listener_addrs]

	# RPOP with a count takes commands already waiting after a BRPOP (a burst is ACKed in batches).
	assert {args[0].upper() for args in seen} <= {"BRPOP", "RPOP", "MULTI", "LPUSH", "EXPIRE", "EXEC"}, seen
	assert all(args[1] == "btu:scheduler:commands" for args in seen if args[0].upper() in ("BRPOP", "RPOP"))
	writes = [
		args[:2] + args[3:] if args[0].upper() == "EXPIRE" else args[:2]
		for args in seen
		if args[0].upper() in ("LPUSH", "EXPIRE")
	]
	assert writes == [["LPUSH", key], ["EXPIRE", key], ["LPUSH", bad_key], ["EXPIRE", bad_key]]
	assert [args[2] for args in seen if args[0].upper() == "EXPIRE"] == ["60", "60"]
	assert running.thread.is_alive()


def test_commands_are_served_first_in_first_out(listener, r):
	names = [f"TS-{n:06d}" for n in range(10, 20)]
	keys = []
	for name in names:
		key, message = command("create_task_schedule", name)
		keys.append(key)
		r.lpush("btu:scheduler:commands", message)
	# One LPUSH with several values: the first value is the first served.
	batch = [command("cancel_task_schedule", f"TS-{n:06d}") for n in range(20, 25)]
	r.lpush("btu:scheduler:commands", *(message for _, message in batch))
	settle(r, listener.dispatcher)
	assert listener.dispatcher.schedules() == names + [f"TS-{n:06d}" for n in range(20, 25)]
	for key in keys + [key for key, _ in batch]:
		assert r.llen(key) == 1


def test_site_field_is_optional(listener, r):
	key1, message1 = command("create_task_schedule", "TS-900000", site="site2.localhost")
	key2, message2 = command("create_task_schedule", "TS-000001")
	r.lpush("btu:scheduler:commands", message1, message2)
	for key in (key1, key2):
		assert json.loads(r.blpop([key], timeout=patient(5))[1])["status"] == "ok"
	settle(r, listener.dispatcher)
	executed = [(rec["site"], rec["name"]) for rec in listener.dispatcher.executed if rec["name"]][:-1]
	assert executed == [("site2.localhost", "TS-900000"), (DEFAULT_SITE, "TS-000001")]


def test_no_site_and_no_default_site_is_refused(start_listener, r):
	start_listener(RecordingDispatcher(default_site=None))
	key, message = command("cancel_task_schedule", "TS-000001")
	r.lpush("btu:scheduler:commands", message)
	reply = json.loads(r.blpop([key], timeout=patient(5))[1])
	assert reply["status"] == "error"
	assert reply["request_type"] == "cancel_task_schedule"
	assert "several" in reply["message"] and "site" in reply["message"]


def test_protocol_call_works_against_the_listener(listener, r):
	reply = protocol.call(r, KEYS, protocol.PING)
	assert reply.ok and reply.outcome == "ok"
	assert reply.payload == {"status": "ok", "request_type": "ping", "message": ACK_MESSAGE}
	reply = protocol.call(r, KEYS, protocol.CANCEL_TASK_SCHEDULE, "TS-000002", site="site1.localhost")
	assert reply.ok and reply.message == ACK_MESSAGE
	reply = protocol.call(r, KEYS, protocol.CANCEL_TASK_SCHEDULE, "TS-424242")
	assert reply.outcome == "error" and "TS-424242" in reply.message


def test_caller_waits_5_s_and_reports_unreachable_without_raising(r):
	"""No scheduler: `protocol.call` BLPOPs 5 s, then says "unreachable" (not a failed command)."""
	reply = protocol.call(r, KEYS, protocol.CANCEL_TASK_SCHEDULE, "TS-000003", site="site1.localhost")
	assert reply.outcome == "unreachable" and not reply.ok
	assert reply.payload is None
	assert reply.message == protocol.UNREACHABLE_MESSAGE
	assert "does not mean the command failed" in reply.message
	assert reply.round_trip_ms >= 4900
	# The command waits on the list, exactly as the document spells it.
	queued = r.lrange("btu:scheduler:commands", 0, -1)
	assert len(queued) == 1
	sent = json.loads(queued[0])
	assert set(sent) == {"request_type", "request_content", "response_key", "site"}
	assert sent["request_type"] == "cancel_task_schedule" and sent["request_content"] == "TS-000003"
	assert sent["response_key"].startswith("btu:scheduler:rpc:")
	assert len(sent["response_key"].removeprefix("btu:scheduler:rpc:")) == 32
	assert not r.exists(sent["response_key"])


def test_caller_with_a_short_socket_timeout_waits_the_full_5_s_then_reports_unreachable(redis_url):
	client = redis.Redis.from_url(redis_url, socket_timeout=2)
	reply = protocol.call(client, KEYS, protocol.PING)
	assert reply.outcome == "unreachable"
	assert reply.round_trip_ms >= 4900


def test_ping_from_the_caller_has_null_content_and_no_site(r):
	command_sent = protocol.make_command(KEYS, protocol.PING)
	assert set(command_sent) == {"request_type", "request_content", "response_key"}
	assert command_sent["request_content"] is None


def test_idle_listener_blocks_instead_of_polling(start_listener, r):
	listener = start_listener(block_seconds=BLOCK_SECONDS)
	raw_ping(r)
	r.config_resetstat()
	time.sleep(3.0)
	stats = r.info("commandstats").get("cmdstat_brpop", {"calls": 0})
	# BRPOP blocks BLOCK_SECONDS at a time: a call or two in 3 s, not thousands.
	assert stats["calls"] <= 3.0 / BLOCK_SECONDS + 2, stats
	assert listener.thread.is_alive()


def test_listener_stops_when_told(start_listener, r):
	running = start_listener()
	raw_ping(r)
	running.stop_event.set()
	running.thread.join(5)
	assert not running.thread.is_alive()


def test_listener_survives_a_redis_outage_and_logs_each_change_once(caplog):
	caplog.set_level(logging.INFO, logger="btu.scheduler_daemon.rpc.listener")
	with RedisServer() as server:
		client = server.client()
		stop = threading.Event()
		listener = CommandListener(client, KEYS, RecordingDispatcher(), process_id="outage")
		thread = threading.Thread(target=listener.run, args=(stop,), daemon=True)
		thread.start()
		try:
			caller = server.client()
			assert protocol.call(caller, KEYS, protocol.PING).ok
			server.restart(down_for=2.0)
			assert thread.is_alive()
			reply = wait_until(
				lambda: protocol.call(caller, KEYS, protocol.PING, timeout=2), 15, "ping after restart", 0.01
			)
			assert reply.ok
		finally:
			stop.set()
			thread.join(10)
	events = [record.getMessage() for record in caplog.records if record.name == "btu.scheduler_daemon.rpc.listener"]
	assert events.count("rpc_redis_lost") == 1, events
	assert events.count("rpc_redis_restored") == 1, events
	assert events.index("rpc_redis_lost") < events.index("rpc_redis_restored")
	assert not thread.is_alive()


def test_listener_refuses_a_decoding_client(redis_server):
	with pytest.raises(ValueError, match="decode_responses=False"):
		CommandListener(redis_server.client(decode_responses=True), KEYS, RecordingDispatcher(), process_id="x")


def test_start_listener_thread_honours_disable_redis_rpc(r, caplog):
	caplog.set_level(logging.INFO, logger="btu.scheduler_daemon.rpc.listener")
	stop = threading.Event()
	disabled = Config(disable_redis_rpc=True, sources={"disable_redis_rpc": "file /etc/x.toml"})
	assert start_listener_thread(r, KEYS, RecordingDispatcher(), disabled, stop) is None
	lines = [record for record in caplog.records if record.getMessage() == "rpc_listener_disabled"]
	assert len(lines) == 1 and lines[0].btu_fields["source"] == "file /etc/x.toml"
	assert r.llen("btu:scheduler:commands") == 0

	thread = start_listener_thread(r, KEYS, RecordingDispatcher(), Config(), stop, process_id="helper")
	try:
		assert thread is not None and thread.is_alive()
		assert protocol.call(r, KEYS, protocol.PING).ok
	finally:
		stop.set()
		thread.join(10)
	assert not thread.is_alive()
