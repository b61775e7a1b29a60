"""The Lua scripts in `lua/`, registered once per Redis client."""

from __future__ import annotations

from functools import lru_cache
from importlib import resources


USES = "-- uses "


@lru_cache(maxsize=None)
def source(name: str) -> str:
	"""The script's text, after the shared files its "-- uses NAME.lua" lines name (Redis scripts cannot import)."""
	text = resources.files("btu.scheduler_daemon").joinpath("lua", f"{name}.lua").read_text()
	shared = [line[len(USES):].strip().removesuffix(".lua") for line in text.splitlines() if line.startswith(USES)]
	return "".join(source(other) for other in shared) + text


def register(redis_conn, name: str):
	"""A callable script (redis-py re-sends it after a Redis restart wiped the script cache)."""
	return redis_conn.register_script(source(name))
