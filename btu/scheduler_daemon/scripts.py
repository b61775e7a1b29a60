"""The Lua scripts in `lua/`, registered once per Redis client."""

from __future__ import annotations

from functools import lru_cache
from importlib import resources


@lru_cache(maxsize=None)
def source(name: str) -> str:
	return resources.files("btu.scheduler_daemon").joinpath("lua", f"{name}.lua").read_text()


def register(redis_conn, name: str):
	"""A callable script (redis-py re-sends it after a Redis restart wiped the script cache)."""
	return redis_conn.register_script(source(name))
