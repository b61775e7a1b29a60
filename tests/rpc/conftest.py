"""Fixtures: real `CommandListener` threads on the session's redis-server."""

from __future__ import annotations

import pytest

from tests.rpc.support import RecordingDispatcher, RunningListener


@pytest.fixture
def r(redis_url, redis_server):
	"""The session's client (emptied) without redis-py 5+'s default 5 s socket timeout: these tests BLPOP longer."""
	client = redis_server.client(socket_timeout=None)
	yield client
	client.close()


@pytest.fixture
def start_listener(redis_server, r):
	"""Factory: start a listener (own client) with a dispatcher; every one is stopped afterwards."""
	started: list[RunningListener] = []

	def start(dispatcher=None, name: str = "listener", client=None, **options) -> RunningListener:
		running = RunningListener(
			client or redis_server.client(), dispatcher or RecordingDispatcher(), name=name, **options
		)
		started.append(running)
		return running

	yield start
	for running in started:
		running.stop()


@pytest.fixture
def listener(start_listener):
	return start_listener()
