"""The original daemon's sorted set on a real Redis: running (no entry overdue longer than a poll leaves one) or left
behind, as status says."""

from __future__ import annotations

import socket
import time

from btu.shared.old_daemon import NEXT_FIRES_KEY, STALE_AFTER_SECS, find, socket_report
from tests.engine.helpers import cli


def test_nothing_found_without_the_key(r):
	assert find(r, 1_000_000.0) is None


def test_entries_all_ahead_mean_a_daemon_may_run(r):
	now = 1_800_000_000.0
	r.zadd(NEXT_FIRES_KEY, {f"TS-000001|{int(now) + 60}": now + 60, f"TS-000002|{int(now) + 600}": now + 600})
	found = find(r, now)
	assert found.entries == 2 and found.polled
	assert "may still be running" in found.describe() and "stop it" in found.describe()
	assert "2 next fires, the earliest due in 60 s" in found.describe()


def test_entries_overdue_within_a_poll_are_said_so(r):
	now = 1_800_000_000.0
	r.zadd(NEXT_FIRES_KEY, {"TS-000001|1": now - STALE_AFTER_SECS + 1, "TS-000002|2": now + 60})
	found = find(r, now)
	assert found.polled
	assert f"the earliest {STALE_AFTER_SECS - 1} s overdue" in found.describe()
	assert "none overdue" not in found.describe()


def test_entries_long_overdue_mean_it_was_left_behind(r):
	now = 1_800_000_000.0
	r.zadd(NEXT_FIRES_KEY, {"TS-000001|1": now - STALE_AFTER_SECS - 1, "TS-000002|2": now + 60})
	found = find(r, now)
	assert not found.polled
	assert f"redis-cli DEL {NEXT_FIRES_KEY}" in found.describe() and "none runs now" in found.describe()


def test_status_says_an_original_daemon_still_runs_on_the_benchs_redis(make_bench, r):
	bench = make_bench("site1.localhost")
	now = time.time()
	r.zadd(NEXT_FIRES_KEY, {f"TS-000001|{int(now) + 300}": now + 300})
	done = cli(bench.path, "status")
	assert done.returncode in (0, 1), done.stderr
	assert "original BTU: the original BTU's daemon may still be running on this Redis" in done.stdout
	r.delete(NEXT_FIRES_KEY)
	assert "original BTU" not in cli(bench.path, "status").stdout


def test_a_daemon_listening_on_the_original_socket_is_found(tmp_path):
	path = str(tmp_path / "btu_scheduler.sock")
	assert socket_report(path) is None
	with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as server:
		server.bind(path)
		server.listen(1)
		assert f"listens on {path}" in socket_report(path)
	assert socket_report(path) is None  # the file stays, nothing listens
