"""Sample task functions for `btu-scheduler demo`, run by a plain `rq worker`.

Declared runnable by the `btu_tasks` hook in btu/hooks.py.
"""

from __future__ import annotations

from datetime import datetime, timezone


def say_hello(name: str = "world") -> str:
	message = f"Hello, {name}! It is {datetime.now(timezone.utc):%H:%M:%S.%f} UTC"
	print(message)
	return message


def add(a: int, b: int) -> int:
	print(f"{a} + {b} = {a + b}")
	return a + b
