"""The Lua scripts in `lua/`, registered once per Redis client.

Every script starts with the key names it may build itself (a site's keys,
the quarantine, rq's queue prefix), generated here from `protocol` and rq, so
a key is spelled in one place: no script holds a literal key name.
"""

from __future__ import annotations

import re
from functools import cache, lru_cache
from importlib import resources

from btu.shared import protocol

USES = "-- uses "
PLACEHOLDER = re.compile(r"\{(\w+)\}")


def lua_text(value: str) -> str:
	return "'" + value.replace("\\", "\\\\").replace("'", "\\'") + "'"


def lua_function(name: str, template: str) -> str:
	"""`protocol.SITE_KEY_TEMPLATES[name]` as a Lua function of its placeholders."""
	parts = PLACEHOLDER.split(template)
	params = parts[1::2]
	pieces = [lua_text(part) if i % 2 == 0 else part for i, part in enumerate(parts) if part]
	return f"local function {name}({', '.join(params)}) return {' .. '.join(pieces)} end\n"


def key_names() -> str:
	"""The Lua header every script gets: BTU's global key names, its site key functions, rq's queue prefix, named
	for the bench's namespace (`protocol.use_namespace`)."""
	return _key_names(protocol.PREFIX)


@cache
def _key_names(prefix: str) -> str:
	"""`key_names` once per prefix, which decides every name protocol gives."""
	from rq import Queue

	names = {
		"QUARANTINE": protocol.QUARANTINE_KEY,
		"QUARANTINED": protocol.QUARANTINED_PREFIX,
		"RESYNC": protocol.RESYNC_KEY,
		"RQ_QUEUE_PREFIX": Queue.redis_queue_namespace_prefix,
	}
	header = "".join(f"local {name} = {lua_text(value)}\n" for name, value in names.items())
	return header + "".join(lua_function(name, template) for name, template in protocol.SITE_KEY_TEMPLATES.items())


@cache
def body(name: str) -> str:
	"""The script's own text, after the shared files its "-- uses NAME.lua" lines name (Redis scripts cannot import)."""
	text = resources.files("btu.scheduler_daemon.leading").joinpath("lua", f"{name}.lua").read_text()
	shared = [line[len(USES) :].strip().removesuffix(".lua") for line in text.splitlines() if line.startswith(USES)]
	return "".join(body(other) for other in shared) + text


def source(name: str) -> str:
	"""The script as Redis runs it: the key names, then its body."""
	return key_names() + body(name)


def register(redis_conn, name: str):
	"""A callable script (redis-py re-sends it after a Redis restart wiped the script cache)."""
	return redis_conn.register_script(source(name))
