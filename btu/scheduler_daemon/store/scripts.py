"""The Lua scripts in `lua/`, registered once per Redis client.

Every script starts with the key names it may build itself (a site's keys,
the quarantine, rq's queue prefix), generated here from the bench's `Keys` and rq, so
a key is spelled in one place: no script holds a literal key name.
"""

from __future__ import annotations

import re
from functools import cache
from importlib import resources

from btu.shared.keys import Keys

USES = "-- uses "
PLACEHOLDER = re.compile(r"\{(\w+)\}")


def lua_text(value: str) -> str:
	return "'" + value.replace("\\", "\\\\").replace("'", "\\'") + "'"


def lua_function(name: str, template: str) -> str:
	"""A site key's template (`Keys.site_key_templates[name]`) as a Lua function of its placeholders."""
	parts = PLACEHOLDER.split(template)
	params = parts[1::2]
	pieces = [lua_text(part) if i % 2 == 0 else part for i, part in enumerate(parts) if part]
	return f"local function {name}({', '.join(params)}) return {' .. '.join(pieces)} end\n"


@cache
def key_names(keys: Keys) -> str:
	"""The Lua header every script gets: the bench's global key names, its site key functions, rq's queue prefix."""
	from rq import Queue

	names = {
		"QUARANTINE": keys.quarantine,
		"QUARANTINED": keys.quarantined_prefix,
		"RESYNC": keys.resync,
		"RQ_QUEUE_PREFIX": Queue.redis_queue_namespace_prefix,
	}
	header = "".join(f"local {name} = {lua_text(value)}\n" for name, value in names.items())
	return header + "".join(lua_function(name, template) for name, template in keys.site_key_templates.items())


@cache
def body(name: str) -> str:
	"""The script's own text, after the shared files its "-- uses NAME.lua" lines name (Redis scripts cannot import)."""
	text = resources.files("btu.scheduler_daemon.store").joinpath("lua", f"{name}.lua").read_text()
	shared = [line[len(USES) :].strip().removesuffix(".lua") for line in text.splitlines() if line.startswith(USES)]
	return "".join(body(other) for other in shared) + text


def source(keys: Keys, name: str) -> str:
	"""The script as Redis runs it: the bench's key names, then its body."""
	return key_names(keys) + body(name)


def register(redis_conn, keys: Keys, name: str):
	"""A callable script (redis-py re-sends it after a Redis restart wiped the script cache)."""
	return redis_conn.register_script(source(keys, name))
