"""Fuzz: 10,000+ random payloads on the command list. Afterwards the listener is
alive, answers a ping, and Redis holds nothing outside btu:scheduler:rpc:*."""

from __future__ import annotations

import json
import logging
import uuid

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from btu.shared import protocol
from tests.rpc.support import SITES, foreign_keys, raw_ping
from tests.support.keys import KEYS

pytestmark = pytest.mark.versions

# Hypothesis draws a few payloads per example and expands them into BATCH_SIZE
# mutants: per-example generation is what costs time, so 350 examples carry 11,200 payloads.
EXAMPLES = 350
BATCH_SIZE = 32

json_values = st.recursive(
	st.none() | st.booleans() | st.integers() | st.floats(allow_nan=True) | st.text(max_size=40),
	lambda children: st.lists(children, max_size=5) | st.dictionaries(st.text(max_size=20), children, max_size=5),
	max_leaves=8,
)
names = st.sampled_from(sorted(SITES["site1.localhost"])[:50] + ["TS-900000", "TS-424242"]) | st.text(max_size=150)
response_keys = st.one_of(
	st.builds(lambda: protocol.new_response_key(KEYS)),
	st.text(max_size=60).map(lambda text: KEYS.response_prefix + text),
	st.sampled_from(
		[
			KEYS.commands,
			KEYS.response_prefix,
			"btu:due",
			"btu:scheduler:leader",
			"victim:key",
			"btu:scheduler:rpc",
			"BTU:SCHEDULER:RPC:x",
			KEYS.response_prefix + "x" * 300,
		]
	),
	st.text(max_size=60),
	json_values,
)
FIELDS = {
	"request_type": st.sampled_from(protocol.REQUEST_TYPES) | st.text(max_size=30) | json_values,
	"request_content": names | json_values,
	"response_key": response_keys,
	"site": st.sampled_from(sorted(SITES) + ["nosuch.localhost", ""]) | st.text(max_size=30) | json_values,
}


@st.composite
def near_valid(draw) -> bytes:
	"""A well-formed command with some fields dropped, mutated or added."""
	command = {
		"request_type": draw(st.sampled_from(protocol.REQUEST_TYPES)),
		"request_content": draw(st.sampled_from(sorted(SITES["site1.localhost"])[:50])),
		"response_key": protocol.new_response_key(KEYS),
	}
	for field, strategy in FIELDS.items():
		action = draw(st.sampled_from(["keep", "keep", "mutate", "drop"]))
		if action == "mutate":
			command[field] = draw(strategy)
		elif action == "drop":
			command.pop(field, None)
	command.update(draw(st.dictionaries(st.text(max_size=10), json_values, max_size=2)))
	return json.dumps(command).encode()


@st.composite
def huge(draw) -> bytes:
	"""Over the 64 KiB limit: parsed to find the response key up to 1 MiB, dropped beyond."""
	size = draw(st.sampled_from([65_537, 70_000, 200_000, 1_100_000]))
	key = draw(st.sampled_from([protocol.new_response_key(KEYS), "victim:key"]))
	return json.dumps({"request_type": "ping", "request_content": "x" * size, "response_key": key}).encode()


payloads = st.one_of(
	st.binary(max_size=300),
	json_values.map(lambda value: json.dumps(value).encode()),
	near_valid(),
	near_valid(),
	near_valid(),
	st.integers(0, 9).flatmap(lambda n: huge() if n == 0 else near_valid()),
)
# A lone surrogate ("\\ud800" in the JSON) is valid JSON but no valid Redis key or UTF-8 text.
REPLACEMENTS = [
	None,
	0,
	-1,
	1.5,
	True,
	"",
	[],
	{},
	"x" * 200,
	"TS-000001",
	"btu:due",
	KEYS.response_prefix,
	KEYS.response_prefix + "\ud800",
	"TS-\udfff",
]


def mutate(rnd, payload: bytes) -> bytes:
	"""`payload` damaged at the byte level or, for a JSON object, in one field."""
	how = rnd.randrange(6)
	if how == 0 and payload:
		at = rnd.randrange(len(payload))
		return payload[:at] + bytes([rnd.randrange(256)]) + payload[at + 1 :]
	if how == 1:
		return payload[: rnd.randrange(len(payload) + 1)]
	if how == 2:
		at = rnd.randrange(len(payload) + 1)
		return payload[:at] + rnd.randbytes(rnd.randrange(1, 16)) + payload[at:]
	if how == 3 and len(payload) < protocol.MAX_COMMAND_BYTES:
		return payload * rnd.randrange(2, 4)
	try:
		command = json.loads(payload)
	except (ValueError, RecursionError):
		return rnd.randbytes(rnd.randrange(64))
	if not isinstance(command, dict):
		return json.dumps(
			{"request_type": "ping", "response_key": protocol.new_response_key(KEYS), "x": command}
		).encode()
	field = rnd.choice(sorted(FIELDS) + sorted(command, key=str)[:3])
	command[field] = rnd.choice(REPLACEMENTS)
	return json.dumps(command).encode()


@st.composite
def batches(draw) -> list[bytes]:
	"""A few payloads drawn by hypothesis, then mutants of them up to BATCH_SIZE."""
	seeds = draw(st.lists(payloads, min_size=3, max_size=6))
	rnd = draw(st.randoms(use_true_random=False))
	return seeds + [mutate(rnd, rnd.choice(seeds)) for _ in range(BATCH_SIZE - len(seeds))]


def test_random_payloads_never_hurt_the_listener(listener, r, caplog):
	caplog.set_level(logging.ERROR, logger="btu.scheduler_daemon.rpc.listener")
	r.set("victim:key", "untouched")
	sent = 0

	@settings(
		max_examples=EXAMPLES,
		deadline=None,
		database=None,
		suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large, HealthCheck.large_base_example],
	)
	@given(batches())
	def push(batch: list[bytes]) -> None:
		nonlocal sent
		with r.pipeline(transaction=False) as pipe:
			for payload in batch:
				pipe.lpush(KEYS.commands, payload)
			pipe.execute()
		sent += len(batch)
		assert raw_ping(r, timeout=60)["status"] == "ok"
		assert listener.thread.is_alive()

	push()
	assert sent >= 10_000
	assert listener.thread.is_alive()
	assert protocol.call(r, KEYS, protocol.PING).ok
	assert r.get("victim:key") == b"untouched"
	assert [key for key in foreign_keys(r) if key != b"victim:key"] == []
	assert r.llen(KEYS.commands) == 0
	crashed = [record for record in caplog.records if record.getMessage() == "rpc_command_crashed"]
	assert crashed == [], crashed[0].btu_fields if crashed else None
	# Every reply the fuzz caused expires on its own.
	ttls = {r.ttl(key) for key in r.scan_iter(match=KEYS.response_prefix + "*", count=1000)}
	# TTL says 0 for a key with under a second left and -2 for one gone since the scan (a slow fuzz outlives its first
	# replies); -1, no expiry, is the failure.
	assert ttls and all(ttl == -2 or 0 <= ttl <= 60 for ttl in ttls), ttls


def test_valid_commands_among_garbage_are_all_acked(listener, r):
	garbage = [b"\x00\xff", b"[]", b'{"request_type": "ping"}', b"{" * 1000]
	keys = []
	with r.pipeline(transaction=False) as pipe:
		for n in range(200):
			key = f"{KEYS.response_prefix}{uuid.uuid4().hex}"
			keys.append(key)
			pipe.lpush(KEYS.commands, garbage[n % len(garbage)])
			pipe.lpush(KEYS.commands, json.dumps(protocol.make_command(KEYS, "ping", response_key=key)))
		pipe.execute()
	raw_ping(r)
	assert all(r.llen(key) == 1 for key in keys)
