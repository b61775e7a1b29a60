"""The BTU Redis RPC protocol: its wire format, built (`make_command`, `call`) and parsed (`parse_command`) here.

Both sides import this module: the scheduler's listener
(`btu.scheduler_daemon.rpc.listener`) and the callers (the Frappe app's Desk
buttons and the `btu-scheduler` CLI, through `call`). It imports neither
frappe nor anything of the scheduler, only redis-py. Its keys are the bench's
(`btu.shared.keys.Keys`: ``commands``, ``response_prefix``).

The protocol (BTU's design document "BTU Scheduler: Redis RPC Control Protocol"):

1. The caller makes a unique response key ``btu:scheduler:rpc:{uuid}``.
2. It LPUSHes a JSON command ``{"request_type", "request_content",
   "response_key"}`` (plus BTU's optional ``"site"``) on
   ``btu:scheduler:commands``.
3. It BLPOPs its response key for at most 5 seconds.
4. The scheduler BRPOPs the command and, before executing it, LPUSHes the
   receipt ACK ``{"status": "ok", "request_type", "message"}`` on the
   response key and EXPIREs that key after 60 seconds.
5. No answer within 5 seconds means "scheduler unreachable": it says
   nothing about the command itself.

Redis refusing the caller's user (an ACL user without BTU's grants, or a
wrong password) is outcome "denied", not "unreachable": the scheduler may be
fine, the fix is a grant (`btu-scheduler setup redis-acl`).
"""

from __future__ import annotations

import json
import re
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from redis import exceptions as redis_errors

from btu.shared.keys import Keys
from btu.shared.redis_refusals import denied_message, is_denied, redis_user
from btu.shared.task_args import json_type

RESPONSE_TTL_SECONDS = 60
CALLER_TIMEOUT_SECONDS = 5
MAX_COMMAND_BYTES = 64 * 1024
# How much of an oversized command is still parsed, only to find where to send the error.
MAX_PARSED_BYTES = 16 * MAX_COMMAND_BYTES
MAX_NAME_LENGTH = 140  # Frappe's varchar name column

PING = "ping"
CREATE_TASK_SCHEDULE = "create_task_schedule"
CANCEL_TASK_SCHEDULE = "cancel_task_schedule"
REQUEST_TYPES = (PING, CREATE_TASK_SCHEDULE, CANCEL_TASK_SCHEDULE)

ACK_MESSAGE = "Command received by BTU Scheduler."
UNREACHABLE_MESSAGE = (
	"The BTU Scheduler did not respond within 5 seconds. This does not mean the command failed: "
	"the scheduler is unreachable. Check that the scheduler process is running and that both "
	"processes share the same Redis instance."
)


def new_response_key(keys: Keys) -> str:
	return f"{keys.response_prefix}{uuid.uuid4().hex}"


def is_response_key(key: Any, keys: Keys) -> bool:
	"""True for a key the scheduler may write a reply to, and only those."""
	return (
		isinstance(key, str)
		and key.startswith(keys.response_prefix)
		and len(key) > len(keys.response_prefix)
		and len(key) <= 256
		and is_utf8(key)
	)


def is_utf8(text: str) -> bool:
	"""False for a str Redis cannot take as a key: JSON may carry lone surrogates ("\\ud800")."""
	try:
		text.encode("utf-8")
	except UnicodeEncodeError:
		return False
	return True


def make_command(
	keys: Keys,
	request_type: str,
	request_content: str | None = None,
	*,
	site: str | None = None,
	response_key: str | None = None,
) -> dict:
	command = {
		"request_type": request_type,
		"request_content": request_content,
		"response_key": response_key or new_response_key(keys),
	}
	if site:
		command["site"] = site
	return command


def make_ack(request_type: str) -> dict:
	return {"status": "ok", "request_type": request_type, "message": ACK_MESSAGE}


def make_error(reason: str, request_type: Any = None) -> dict:
	return {"status": "error", "request_type": request_type, "message": reason}


@dataclass(frozen=True)
class Reply:
	"""What a caller got back: ``ok`` (the ACK), ``error``, ``unreachable`` or ``denied`` (by Redis's ACL)."""

	outcome: str
	message: str
	payload: dict | None
	round_trip_ms: float

	@property
	def ok(self) -> bool:
		return self.outcome == "ok"


def call(
	redis_conn,
	keys: Keys,
	request_type: str,
	request_content: str | None = None,
	*,
	site: str | None = None,
	timeout: float = CALLER_TIMEOUT_SECONDS,
) -> Reply:
	"""Send one command and wait for its receipt ACK (BLPOP, `timeout` seconds).

	Redis refusing the user is a "denied" reply; any other Redis error is raised."""
	command = make_command(keys, request_type, request_content, site=site)
	started = time.perf_counter()
	try:
		redis_conn.lpush(keys.commands, json.dumps(command))
		# A client whose socket timeout is not longer than the wait (redis-py 5+
		# defaults to 5 s) would time out on the socket: wait in shorter BLPOPs.
		socket_timeout = redis_conn.connection_pool.connection_kwargs.get("socket_timeout")
		step = max(socket_timeout - 0.5, 0.1) if socket_timeout else timeout
		deadline = started + timeout
		answer = None
		while answer is None and (remaining := deadline - time.perf_counter()) > 0.001:
			answer = redis_conn.blpop([command["response_key"]], timeout=min(remaining, step))
	except redis_errors.RedisError as exc:
		if not is_denied(exc):
			raise
		return Reply(
			"denied",
			denied_message(exc, redis_user(redis_conn), keys.grant),
			None,
			(time.perf_counter() - started) * 1000,
		)
	elapsed_ms = (time.perf_counter() - started) * 1000
	if answer is None:
		return Reply("unreachable", UNREACHABLE_MESSAGE, None, elapsed_ms)
	raw = answer[1]
	try:
		payload = json.loads(raw)
	except ValueError:
		return Reply("error", f"The scheduler answered with something that is not JSON: {raw!r}", None, elapsed_ms)
	outcome = "ok" if payload.get("status") == "ok" else "error"
	return Reply(outcome, str(payload.get("message", "")), payload, elapsed_ms)


# -- Parsing a command (the scheduler's side) ---------------------------------------


class Command:
	"""A well-formed command; once its batch is checked, what the dispatcher executes."""

	__slots__ = ("request_type", "name", "site", "response_key", "size")

	def __init__(self, request_type: str, name: str | None, site: str | None, response_key: str, size: int = 0):
		self.request_type = request_type
		self.name = name
		self.site = site  # as sent until `check` resolves it
		self.response_key = response_key
		self.size = size

	@property
	def reply(self) -> dict:
		return make_ack(self.request_type)


class Rejection:
	"""A refused command: the error reply, and where it goes (None: nowhere it may go)."""

	__slots__ = ("response_key", "reply")

	def __init__(self, response_key: str | None, reply: dict):
		self.response_key = response_key
		self.reply = reply


def check_name(field: str, value: Any) -> str | None:
	"""Why `value` cannot be a site or schedule name, or None."""
	if not isinstance(value, str):
		return f"{field} must be a string, got {json_type(value)}"
	if not value.strip():
		return f"{field} must not be empty"
	if len(value) > MAX_NAME_LENGTH:
		return f"{field} is {len(value)} characters long; the limit is {MAX_NAME_LENGTH}"
	if not value.isprintable():
		return f"{field} {value!r} holds control characters"
	return None


def clip(value: Any, limit: int = 80) -> str:
	text = value if isinstance(value, str) else repr(value)
	return text if len(text) <= limit else text[:limit] + "..."


def decode_command(data: bytes, reject: Callable[..., Rejection]) -> dict | Rejection:
	"""`data` as a JSON object, or the `Rejection` `reject` makes of it: too large to parse even for its response key,
	not UTF-8 JSON, or not an object."""
	size = len(data)
	if size > MAX_COMMAND_BYTES and size > MAX_PARSED_BYTES:
		return reject(f"command of {size} bytes exceeds the {MAX_COMMAND_BYTES}-byte limit", size=size)
	try:
		message = json.loads(data.decode("utf-8"))
	except UnicodeDecodeError as exc:
		return reject(f"command is not UTF-8 JSON: {exc.reason} at byte {exc.start}", size=size)
	except (ValueError, RecursionError) as exc:
		return reject(f"command is not JSON: {clip(str(exc), 120)}", size=size)
	if not isinstance(message, dict):
		return reject(f"command must be a JSON object, got {json_type(message)}", size=size)
	return message


def parse_command(raw: bytes | str, keys: Keys, reject: Callable[..., Rejection]) -> Command | Rejection:
	"""The command in `raw`, its site and target not checked yet, or its `Rejection` as `reject` logged and made it
	(the listener logs it)."""
	data = raw.encode("utf-8", "surrogatepass") if isinstance(raw, str) else raw
	message = decode_command(data, reject)
	if isinstance(message, Rejection):
		return message
	size = len(data)
	oversized = size > MAX_COMMAND_BYTES
	request_type = message.get("request_type")
	response_key = message.get("response_key")
	site = message.get("site")
	name = message.get("request_content")
	known_type = request_type if isinstance(request_type, str) and request_type in REQUEST_TYPES else None
	context = {
		"request_type": clip(request_type) if request_type is not None else None,
		"site": clip(site) if site is not None else None,
		"schedule": clip(name) if name is not None else None,
		"size": size,
	}
	if not is_response_key(response_key, keys):
		reason = (
			"response_key is missing"
			if response_key is None
			else (
				f"response_key {clip(response_key)!s} is not a key under {keys.response_prefix} "
				"(UTF-8, at most 256 characters)"
			)
		)
		return reject(reason, **context)

	def refuse(reason: str) -> Rejection:
		return reject(reason, response_key=response_key, reply_type=known_type, **context)

	if oversized:
		return refuse(f"command of {size} bytes exceeds the {MAX_COMMAND_BYTES}-byte limit")
	if request_type is None:
		return refuse(f"request_type is missing; allowed: {', '.join(REQUEST_TYPES)}")
	if known_type is None:
		return refuse(f"request_type {clip(request_type)!r} is unknown; allowed: {', '.join(REQUEST_TYPES)}")
	if site is not None:
		problem = check_name("site", site)
		if problem:
			return refuse(problem)
	if request_type == PING:
		if name is not None and not isinstance(name, str):
			return refuse(f"request_content of ping must be null, got {json_type(name)}")
		return Command(request_type, None, None, response_key)

	problem = check_name("request_content (the Task Schedule name)", name)
	if problem:
		return refuse(f"{request_type}: {problem}")
	return Command(request_type, name, site, response_key, size)
