"""The BTU Redis RPC protocol and every Redis key BTU owns.

Both sides import this module: the scheduler's listener
(`btu.scheduler_daemon.rpc.listener`) and the callers (the Frappe app's Desk
buttons and the `btu-scheduler` CLI, through `call`). It imports neither
frappe nor anything of the scheduler, only redis-py.

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
from dataclasses import dataclass
from typing import Any
from urllib.parse import parse_qsl, urlencode

from redis import exceptions as redis_errors

# -- RPC ---------------------------------------------------------------------

COMMANDS_KEY = "btu:scheduler:commands"
RESPONSE_KEY_PREFIX = "btu:scheduler:rpc:"
RESPONSE_TTL_SECONDS = 60
CALLER_TIMEOUT_SECONDS = 5
MAX_COMMAND_BYTES = 64 * 1024

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


def new_response_key() -> str:
	return f"{RESPONSE_KEY_PREFIX}{uuid.uuid4().hex}"


def is_response_key(key: Any) -> bool:
	"""True for a key the scheduler may write a reply to, and only those."""
	return (
		isinstance(key, str)
		and key.startswith(RESPONSE_KEY_PREFIX)
		and len(key) > len(RESPONSE_KEY_PREFIX)
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
	request_type: str,
	request_content: str | None = None,
	*,
	site: str | None = None,
	response_key: str | None = None,
) -> dict:
	command = {
		"request_type": request_type,
		"request_content": request_content,
		"response_key": response_key or new_response_key(),
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
	request_type: str,
	request_content: str | None = None,
	*,
	site: str | None = None,
	timeout: float = CALLER_TIMEOUT_SECONDS,
) -> Reply:
	"""Send one command and wait for its receipt ACK (BLPOP, `timeout` seconds).

	Redis refusing the user is a "denied" reply; any other Redis error is raised."""
	command = make_command(request_type, request_content, site=site)
	started = time.perf_counter()
	try:
		redis_conn.lpush(COMMANDS_KEY, json.dumps(command))
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
			denied_message(exc, redis_user(redis_conn), KEYS_GRANT),
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


# -- Redis refusing a user ---------------------------------------------------------

# The ACL key pattern of every key above: the one grant a caller (the Desk, `ping`, `status`) needs.
KEYS_GRANT = "~btu:*"
ACL_FIX = "see btu-scheduler setup redis-acl"
# How Redis words a refusal, for the errors redis-py does not give a class of their own: a
# NOPERM inside a Lua script is a plain ResponseError, and older redis-py name fewer classes.
DENIED_MARKERS = ("NOPERM", "no permissions to", "The user executing the script can't", "WRONGPASS", "NOAUTH")
AUTH_ERRORS = tuple(
	getattr(redis_errors, name)
	for name in ("AuthenticationError", "AuthenticationWrongNumberOfArgsError")
	if hasattr(redis_errors, name)
)


def is_denied(exc: BaseException) -> bool:
	"""True when Redis refused the connection's user (NOPERM, WRONGPASS, NOAUTH), not when it is down."""
	if isinstance(exc, (getattr(redis_errors, "NoPermissionError", ()), *AUTH_ERRORS)):
		return True
	return isinstance(exc, redis_errors.RedisError) and any(marker in str(exc) for marker in DENIED_MARKERS)


def is_auth_failure(exc: BaseException) -> bool:
	"""True when Redis refused the user's name or password (rather than one grant)."""
	text = str(exc)
	return isinstance(exc, AUTH_ERRORS) or "WRONGPASS" in text or "NOAUTH" in text


def redis_user(redis_conn) -> str:
	"""The ACL user a client logs in as ("default" without a username)."""
	return redis_conn.connection_pool.connection_kwargs.get("username") or "default"


def denied_message(exc: BaseException, user: str, grant: str) -> str:
	"""One line for a refusal: which user, which grant (or its password), and the fix."""
	if is_auth_failure(exc):
		return (
			f"permission denied by Redis: user {user!r} cannot log in ({exc}); check its password "
			f"(rq_username/rq_password in common_site_config.json, or the URL); {ACL_FIX}"
		)
	return f"permission denied by Redis: user {user!r} lacks the grant {grant} ({exc}); {ACL_FIX}"


# -- Redis URLs ----------------------------------------------------------------------

# What redis-py's from_url connects to: TCP, TLS, a Unix socket.
REDIS_URL_SCHEMES = ("redis", "rediss", "unix")
MASK = "***"
URL_IN_TEXT = re.compile(r"[A-Za-z][A-Za-z0-9+.-]*://[^\s'\"<>]+")


def mask_url(text: str) -> str:
	"""`text` with the password of every URL in it (userinfo or ?password=) replaced by ***.

	A text without "://" is taken as one URL without its scheme ("user:pw@host:port").
	Every place that shows or logs a Redis URL, or a message that may hold one, passes it here."""
	if "://" not in text:
		return _mask_one(text)
	return URL_IN_TEXT.sub(lambda found: _mask_one(found.group()), text)


def _mask_one(url: str) -> str:
	scheme, separator, rest = url.partition("://")
	if not separator:
		scheme, rest = "", url
	main, question, query = rest.partition("?")
	netloc, slash, path = main.partition("/")
	if "@" in netloc:
		userinfo, _, hostport = netloc.rpartition("@")
		user, colon, _password = userinfo.partition(":")
		netloc = f"{user}:{MASK}@{hostport}" if colon else f"{userinfo}@{hostport}"
	if query:
		pairs = parse_qsl(query, keep_blank_values=True)
		query = urlencode([(k, MASK if k.lower() == "password" else v) for k, v in pairs], safe="*")
	return f"{scheme}{separator}{netloc}{slash}{path}{question}{query}"


def is_redis_url(text: str) -> bool:
	"""True when `text` starts with a scheme of REDIS_URL_SCHEMES and "://" (any case, spaces around ignored)."""
	scheme, separator, _ = text.strip().partition("://")
	return bool(separator) and scheme.lower() in REDIS_URL_SCHEMES


def redis_address(redis_conn) -> str:
	"""Where a client connects, without its password: "unix:///run/redis.sock", "127.0.0.1:6379/0", or for a
	Sentinel client the master it last found: "10.0.0.2:6379/0 (sentinel service mymaster)"; asks no server."""
	pool = redis_conn.connection_pool
	kwargs = pool.connection_kwargs
	service = getattr(pool, "service_name", None)
	if service is not None:
		master = getattr(pool, "master_address", None)
		found = f"{master[0]}:{master[1]}/{kwargs.get('db', 0)}" if master else "master not found yet"
		return f"{found} (sentinel service {service})"
	if kwargs.get("path"):
		return f"unix://{kwargs['path']}"
	return f"{kwargs.get('host', '?')}:{kwargs.get('port', '?')}/{kwargs.get('db', 0)}"


# -- Scheduler coordination ------------------------------------------------------

# The leader lease: value "<epoch>|<holder>", set with PX so Redis's own clock
# times it out. The epoch (INCR of LEADER_EPOCH_KEY) is the fencing token.
LEADER_KEY = "btu:scheduler:leader"
LEADER_EPOCH_KEY = "btu:scheduler:leader:epoch"
# Pub/sub channels: every scheduler process subscribes to both. A process
# that changed the state publishes on WAKE_CHANNEL so the leader recomputes
# its sleep at once; a leader that steps down publishes on HANDOFF_CHANNEL so
# a standby takes over at once.
WAKE_CHANNEL = "btu:scheduler:wake"
HANDOFF_CHANNEL = "btu:scheduler:handoff"
# JSON summary for the Desk and `btu-scheduler status`.
STATUS_KEY = "btu:scheduler:status"
# Sorted set of scheduler processes scored by their last heartbeat (epoch ms),
# and per process a JSON hash of who it is, expiring with its heartbeat.
PROCESSES_KEY = "btu:scheduler:processes"
PROCESS_KEY_PREFIX = "btu:scheduler:process:"


def process_key(process_id: str) -> str:
	return f"{PROCESS_KEY_PREFIX}{process_id}"


# The leader's acknowledgement that it fires a site's Frappe Scheduled Job Types now: one key per (bench, site),
# value the lease token, refreshed with each heartbeat and expiring FRAPPE_JOBS_ACK_TTL_SECONDS after the last
# refresh, deleted when the leader stops firing them or steps down. Frappe's tick stands back for a job type only
# while its site's key exists. The bench id is in the key because benches can share one Redis with sites of the
# same name, and each must stand back only for a scheduler of its own bench. Site names hold no ":" (bench.py
# refuses them), so the key reads unambiguously from the right whatever the bench id holds.
FRAPPE_JOBS_ACK_PREFIX = "btu:frappe-jobs:ack:"
# Long against the refresh (HEARTBEAT_SECONDS, 5 s) and against a failover (a new leader acknowledges after its
# first full reconcile), short against Frappe's tick (60 s on v15): Frappe fires again within a tick or two of the
# leader's death.
FRAPPE_JOBS_ACK_TTL_SECONDS = 30


def frappe_jobs_ack_key(bench_id: str, site: str) -> str:
	return f"{FRAPPE_JOBS_ACK_PREFIX}{bench_id}:{site}"


# -- Schedule state ----------------------------------------------------------------

# One sorted set for every site: member "<site>|<schedule>", score = the fire
# time in epoch milliseconds. Site names never contain "|".
DUE_KEY = "btu:due"
# Fires prepared ahead of their moment (job hash written, on no queue yet):
# score = fire time in epoch ms, member = what the release step needs
# (btu.scheduler_daemon.leading.state.Prepared).
PREPARED_KEY = "btu:prepared"
SITES_KEY = "btu:sites"
# State that held a wrong value (another type, junk members, text where a
# number belongs) is moved aside, never fired from and never fatal
# (lua/guard.lua): QUARANTINE_KEY is a hash, what was moved -> JSON {reason,
# at_ms, detail}; a moved key lives on, for a week, as QUARANTINED_PREFIX +
# its name. RESYNC_KEY holds "<site>|<schedule>" members whose state is to be
# rebuilt from the database row, "<site>|*" for all of a site's, "*" for all.
QUARANTINE_KEY = "btu:quarantine"
QUARANTINED_PREFIX = "btu:quarantined:"
RESYNC_KEY = "btu:resync"
RESYNC_ALL = "*"
# A random value written when the state is first built: when it is gone,
# Redis lost its data and every process rebuilds from the databases.
GENERATION_KEY = "btu:generation"


def due_member(site: str, schedule: str) -> str:
	return f"{site}|{schedule}"


def parse_due_member(member: str | bytes) -> tuple[str, str]:
	if isinstance(member, bytes):
		member = member.decode()
	site, _, schedule = member.partition("|")
	return site, schedule


# A site's keys, as templates: the functions below fill them in Python, and scripts.py turns them
# into Lua functions of the same names, so the scripts never spell a key themselves.
SITE_KEY_TEMPLATES = {
	"schedule_key": "btu:site:{site}:schedule:{schedule}",
	"definition_key": "btu:site:{site}:definition:{schedule}",
	"prepared_index_key": "btu:site:{site}:prepared:{schedule}",
	"site_schedules_key": "btu:site:{site}:schedules",
	"recent_fires_key": "btu:site:{site}:fires",
	"invalid_rows_key": "btu:site:{site}:invalid",
	"counters_key": "btu:site:{site}:counters",
	"task_running_key": "btu:site:{site}:running:{task}",
}


def schedule_key(site: str, schedule: str) -> str:
	"""Hash: the schedule's state: name, fingerprint, cursor (pending slot, ms), fire_at, runs, paused, finished,
	modified (its spec and job template: `definition_key`)."""
	return SITE_KEY_TEMPLATES["schedule_key"].format(site=site, schedule=schedule)


def definition_key(site: str, schedule: str) -> str:
	"""String: the schedule's spec and job template, two JSON documents a newline apart. Kept out of its state hash so
	that the hash stays a listpack: Redis keeps a hash with a value over hash-max-listpack-value (64 bytes) as a hash
	table, and the two documents are hundreds of bytes (1,658 bytes a schedule in one hash, 1,136 apart)."""
	return SITE_KEY_TEMPLATES["definition_key"].format(site=site, schedule=schedule)


def prepared_index_key(site: str, schedule: str) -> str:
	"""Sorted set: the schedule's members of the prepared set, so that withdrawing them touches no other's."""
	return SITE_KEY_TEMPLATES["prepared_index_key"].format(site=site, schedule=schedule)


def site_schedules_key(site: str) -> str:
	"""Set of the schedule names this site has in the state."""
	return SITE_KEY_TEMPLATES["site_schedules_key"].format(site=site)


def recent_fires_key(site: str) -> str:
	"""Capped list of the newest fires (JSON), newest first."""
	return SITE_KEY_TEMPLATES["recent_fires_key"].format(site=site)


def invalid_rows_key(site: str) -> str:
	"""Hash: schedule name -> why its row was kept out of the state."""
	return SITE_KEY_TEMPLATES["invalid_rows_key"].format(site=site)


def counters_key(site: str) -> str:
	"""Hash of per-site counters: fired, skipped_overlap, missed, expired, ..."""
	return SITE_KEY_TEMPLATES["counters_key"].format(site=site)


# The highest BTU Task.max_concurrent_runs: a release script reads the status of every job in a limited
# Task's running set (once per script).
MAX_CONCURRENT_RUNS = 100


def task_running_key(site: str, task: str) -> str:
	"""Set of the job ids release.lua queued for a Task with a concurrency limit, while they may be queued or
	started: each check drops those that are not (lua/release.lua)."""
	return SITE_KEY_TEMPLATES["task_running_key"].format(site=site, task=task)


# -- Task outcomes (the Frappe side's) ------------------------------------------------

# Hash per site: what finished runs counted, for Prometheus (btu.btu_core.insights.task_outcomes). The Frappe
# side's task runner writes it and its metrics endpoint reads it; the scheduler neither. So it is outside btu:site:*
# (the scheduler's state, whose keys it type-checks, quarantines and purges) and outside SITE_KEY_TEMPLATES (keys
# for the Lua scripts): a site the scheduler purges or a state it rebuilds keeps its counts.
TASK_OUTCOMES_KEY_PREFIX = "btu:task_outcomes:"


def task_outcomes_key(site: str) -> str:
	return f"{TASK_OUTCOMES_KEY_PREFIX}{site}"


# -- Benches sharing one Redis ------------------------------------------------------------

# Every key above starts with "btu:", as seed 000 names them. Benches that share one Redis server
# (hosting providers, frappe_docker's shared services) would share those keys: one lease, one
# command list, and a site's keys whichever bench it is in. `btu_namespace` in a bench's
# common_site_config.json gives that bench keys of its own, "btu@<namespace>:...", which no pattern
# of seed 000's keys ("btu:*") matches, so an ACL grant covers one bench's keys only; both halves
# call `use_namespace` once they know their bench, before they name a key.
NAMESPACE_SETTING = "btu_namespace"
NAMESPACE_FORM = re.compile(r"[A-Za-z0-9_.-]{1,64}\Z")
SEED_PREFIX = "btu:"
NAMESPACE: str | None = None
PREFIX = SEED_PREFIX
_NAMED = (
	"COMMANDS_KEY",
	"RESPONSE_KEY_PREFIX",
	"LEADER_KEY",
	"LEADER_EPOCH_KEY",
	"WAKE_CHANNEL",
	"HANDOFF_CHANNEL",
	"STATUS_KEY",
	"PROCESSES_KEY",
	"PROCESS_KEY_PREFIX",
	"DUE_KEY",
	"PREPARED_KEY",
	"SITES_KEY",
	"QUARANTINE_KEY",
	"QUARANTINED_PREFIX",
	"RESYNC_KEY",
	"GENERATION_KEY",
	"TASK_OUTCOMES_KEY_PREFIX",
	"FRAPPE_JOBS_ACK_PREFIX",
)
_SUFFIXES = {name: globals()[name].removeprefix(SEED_PREFIX) for name in _NAMED}
_TEMPLATE_SUFFIXES = {name: template.removeprefix(SEED_PREFIX) for name, template in SITE_KEY_TEMPLATES.items()}


def namespace_problem(namespace) -> str | None:
	"""Why `namespace` cannot name a bench's keys, or None (None and "" mean no namespace)."""
	if namespace in (None, ""):
		return None
	if not isinstance(namespace, str) or not NAMESPACE_FORM.match(namespace):
		return (
			f"{NAMESPACE_SETTING} {namespace!r} in common_site_config.json: "
			"give 1 to 64 letters, digits, '_', '.' or '-' "
			"(a name no other bench on the same Redis uses, such as the bench's id), or remove it"
		)
	return None


def prefix_for(namespace: str | None) -> str:
	return f"btu@{namespace}:" if namespace else SEED_PREFIX


def use_namespace(namespace: str | None) -> None:
	"""Name every key and channel of this module for the bench's namespace (None or "": seed 000's names)."""
	problem = namespace_problem(namespace)
	if problem:
		raise ValueError(problem)
	global NAMESPACE, PREFIX, SITE_KEY_TEMPLATES, KEYS_GRANT
	prefix = prefix_for(namespace)
	names = globals()
	for name, suffix in _SUFFIXES.items():
		names[name] = prefix + suffix
	SITE_KEY_TEMPLATES = {name: prefix + suffix for name, suffix in _TEMPLATE_SUFFIXES.items()}
	KEYS_GRANT = f"~{prefix}*"
	NAMESPACE, PREFIX = namespace or None, prefix
