"""Tier-1 fixtures: a private redis-server per test session, real MariaDB, dev benches.

No fakes: every fixture here is a real service. MariaDB is the machine's own
(127.0.0.1:3306, root; override with BTU_TEST_DB_HOST/PORT/ROOT_USER/ROOT_PASSWORD);
each dev bench makes its own databases and drops them afterwards.
"""

from __future__ import annotations

import io
import logging
import os
import sys
import uuid
from datetime import datetime, timezone
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
if str(REPO) not in sys.path:
	sys.path.insert(0, str(REPO))

from tests.support.redis_server import RedisServer  # noqa: E402

DB = {
	"db_host": os.environ.get("BTU_TEST_DB_HOST", "127.0.0.1"),
	"db_port": int(os.environ.get("BTU_TEST_DB_PORT", "3306")),
	"db_root_user": os.environ.get("BTU_TEST_DB_ROOT_USER", "root"),
	"db_root_password": os.environ.get("BTU_TEST_DB_ROOT_PASSWORD", ""),
}
# The dev benches' apps besides btu and their own btu_demo: `tests`, whose tasks (tests/engine/tasks.py) the rq
# executor runs.
APPS = {"tests": REPO}
STARTED = pytest.StashKey[datetime]()


@pytest.fixture(scope="session")
def redis_server():
	"""A redis-server of this test session's own, on a free port."""
	server = RedisServer().start()
	yield server
	server.close()


@pytest.fixture
def redis_url(redis_server):
	redis_server.client().flushall()
	return redis_server.url


@pytest.fixture
def r(redis_url, redis_server):
	"""A client of the session's redis-server, emptied before the test."""
	client = redis_server.client()
	yield client
	client.close()


@pytest.fixture(scope="session")
def db_settings():
	import pymysql

	try:
		pymysql.connect(
			host=DB["db_host"],
			port=DB["db_port"],
			user=DB["db_root_user"],
			password=DB["db_root_password"],
			connect_timeout=5,
		).close()
	except pymysql.MySQLError as exc:
		pytest.fail(f"MariaDB is not answering on {DB['db_host']}:{DB['db_port']} as {DB['db_root_user']}: {exc}")
	return dict(DB)


@pytest.fixture
def make_bench(tmp_path, db_settings, redis_url):
	"""Factory: a dev bench with the given sites; every one made is dropped afterwards."""
	from devbench import bench as devbench

	made = []

	def make(*sites: str, **kwargs):
		path = tmp_path / f"bench-{uuid.uuid4().hex[:8]}"
		options = {**db_settings, "redis_url": redis_url, "apps": APPS, **kwargs}
		bench = devbench.create_dev_bench(path, sites or ("site1.localhost",), **options)
		made.append((path, options))
		return bench

	yield make
	for path, options in made:
		devbench.drop_dev_bench(
			path, db_root_user=options["db_root_user"], db_root_password=options["db_root_password"]
		)


@pytest.fixture
def log_stream():
	"""A buffer to log into with `configure`; its handler is removed afterwards. A handler left behind would hold the
	stream pytest captured for the test, closed after it, and every later test's log line would fail to write there."""
	from btu.scheduler_daemon.log import EventHandler

	root = logging.getLogger()
	level = root.level
	yield io.StringIO()
	for handler in list(root.handlers):
		if isinstance(handler, EventHandler):
			root.removeHandler(handler)
	root.setLevel(level)


def pytest_collection_modifyitems(items):
	"""The longest tests first: pytest-xdist hands tests out in this order, so none starts last and runs alone."""
	items.sort(key=lambda item: item.get_closest_marker("slow") is None)


def pytest_sessionstart(session):
	session.config.stash[STARTED] = datetime.now(timezone.utc)


def pytest_terminal_summary(terminalreporter, config):
	"""The engine's measured figures of this run (tests.engine.helpers.report), whichever process measured them."""
	from tests.engine import helpers

	started = config.stash.get(STARTED, None)
	figures = helpers.reported_since(started) if started else []
	if figures:
		terminalreporter.section("btu engine figures")
		for title, text in figures:
			terminalreporter.write_line(f"{title}: {text}")
		terminalreporter.write_line(f"(also in {helpers.FIGURES_FILE})")
