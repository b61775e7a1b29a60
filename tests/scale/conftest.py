"""Scale fixtures: the engine tests' scheduler processes and dev benches, and MariaDB servers of the test's own."""

from __future__ import annotations

import pytest

# Imported so pytest registers them here too: `processes`, `engine_bench`, and the hook
# that lets `processes` print the schedulers' logs when a test fails.
from tests.engine.conftest import engine_bench, processes, pytest_runtest_makereport  # noqa: F401
from tests.support.mariadb_server import MariaDBServer


@pytest.fixture
def mariadb():
	"""Factory: a MariaDB server of the test's own (`max_connections=...`, more options as keywords), stopped and
	removed afterwards."""
	started: list[MariaDBServer] = []

	def start(max_connections: int = 151, **options) -> MariaDBServer:
		server = MariaDBServer(max_connections=max_connections, **options).start()
		started.append(server)
		return server

	yield start
	for server in started:
		server.close()
