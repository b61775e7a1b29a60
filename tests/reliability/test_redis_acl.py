"""A Redis ACL user as `bench create-rq-users` makes it, and the grants `btu-scheduler setup redis-acl` adds.

Every test runs the real CLI against the session's private redis-server, with
the dev bench's common_site_config.json set as Frappe's command sets it
(use_rq_auth, rq_username, rq_password). No password may appear in any output.
"""

from __future__ import annotations

import json
import time
import uuid

import pytest
import redis

from btu.scheduler_daemon.log import configure, log_event
from btu.shared import protocol
from btu.shared.redis_urls import mask_url
from tests.engine.helpers import ONE_SECOND, cli, queue_ids, queue_key, wait_until
from tests.reliability.helpers import site_job_ids
from tests.support.keys import KEYS
from tests.support.ports import claim_port
from tests.support.slack import patient

pytestmark = pytest.mark.versions

PASSWORD = "s3cret-" + uuid.uuid4().hex[:8]


def frappe_rules(bench_id: str) -> dict:
	"""`frappe.utils.redis_queue.RedisQueue.get_new_user_settings`: what `bench create-rq-users` grants."""
	return {
		"reset_keys": True,
		"keys": ["rq:[^q]*", "rq:queues", f"rq:queue:{bench_id}:*"],
		"commands": ["+@all", "-@admin"],
	}


@pytest.fixture
def acl_bench(engine_bench, r):
	"""Factory: (bench, SiteData, user) with the bench's Redis user made by Frappe's rules; the user is deleted
	afterwards."""
	users = []

	def make(extra: tuple[str, ...] = (), frappe: bool = True):
		bench, data = engine_bench()
		user = f"btu-acl-{uuid.uuid4().hex[:6]}"
		users.append(user)
		if frappe:
			r.acl_setuser(user, enabled=True, passwords=f"+{PASSWORD}", **frappe_rules(bench.bench_id))
		else:
			r.acl_setuser(
				user, enabled=True, passwords=f"+{PASSWORD}", reset_keys=True, reset_channels=True, commands=["-@all"]
			)
		if extra:
			r.execute_command("ACL", "SETUSER", user, *extra)
		path = bench.path / "sites" / "common_site_config.json"
		path.write_text(
			json.dumps({**json.loads(path.read_text()), "use_rq_auth": 1, "rq_username": user, "rq_password": PASSWORD})
		)
		task = data.insert_task(function_string="tests.engine.tasks.record", arguments={"key": "test:runs"})
		data.insert_schedule(task, run_frequency="Cron Style", cron_string=ONE_SECOND)
		return bench, data, user

	yield make
	for user in users:
		r.acl_deluser(user)


def printed_grants(bench, user: str) -> list[str]:
	done = cli(bench.path, "setup", "redis-acl")
	assert done.returncode == 0, done.stderr
	line = done.stdout.strip()
	assert line.startswith(f"ACL SETUSER {user} "), line
	return line.split()[3:]


def one_line(text: str) -> str:
	lines = text.strip().splitlines()
	assert len(lines) == 1, f"expected one line, got:\n{text}"
	assert "Traceback" not in text and PASSWORD not in text
	return lines[0]


def test_frappe_rq_user_is_refused_at_start_in_one_line(acl_bench, processes):
	bench, _, user = acl_bench()
	scheduler = processes.scheduler(bench.path)
	assert scheduler.process.wait(patient(20)) == 2
	line = one_line(scheduler.log())
	assert line.startswith(f"btu-scheduler run: permission denied by Redis: user {user!r} lacks the grant ~btu:* (")
	assert line.endswith("see btu-scheduler setup redis-acl")


@pytest.mark.parametrize("missing, named", [("channels", "&btu:scheduler:wake"), ("script", "+script|load")])
def test_each_missing_grant_is_named(acl_bench, processes, r, missing, named):
	"""Frappe's user plus every printed grant but one: that one is named."""
	bench, _, user = acl_bench()
	granted = printed_grants(bench, user)
	if missing == "channels":
		granted = [rule for rule in granted if not rule.startswith("&")]
	else:
		granted.append("-script|load")
	r.execute_command("ACL", "SETUSER", user, *granted)
	scheduler = processes.scheduler(bench.path)
	assert scheduler.process.wait(patient(20)) == 2
	assert f"lacks the grant {named}" in one_line(scheduler.log())


def test_wrong_password_is_refused_at_start_in_one_line(acl_bench, processes):
	bench, _, user = acl_bench()
	path = bench.path / "sites" / "common_site_config.json"
	path.write_text(json.dumps({**json.loads(path.read_text()), "rq_password": "not-" + PASSWORD}))
	scheduler = processes.scheduler(bench.path)
	assert scheduler.process.wait(patient(20)) == 2
	line = one_line(scheduler.log())
	assert line.startswith(f"btu-scheduler run: permission denied by Redis: user {user!r} cannot log in ("), line
	assert "rq_password" in line


def test_status_ping_resync_refused_in_one_line(acl_bench):
	bench, _, user = acl_bench()
	for command in ("status", "ping", "resync"):
		done = cli(bench.path, command)
		assert done.returncode == 2, (command, done.stdout, done.stderr)
		line = one_line(done.stderr)
		assert line.startswith(
			f"btu-scheduler {command}: permission denied by Redis: user {user!r} lacks the grant ~btu:* ("
		), line
		assert PASSWORD not in done.stdout


@pytest.mark.parametrize("frappe", [True, False], ids=["frappe-user-plus-grants", "only-the-printed-grants"])
def test_printed_grants_let_it_fire_end_to_end(acl_bench, processes, r, redis_url, frappe):
	"""With Frappe's user plus the printed line (or the printed line alone), a schedule fires and a worker runs it;
	RPC ping, status and resync work; so does the release of a Task with a concurrency limit (its running set)."""
	bench, data, user = acl_bench(frappe=frappe)
	limited = data.insert_task(
		function_string="tests.engine.tasks.record", arguments={"key": "test:limited-runs"}, max_concurrent_runs=1
	)
	data.insert_schedule(limited, run_frequency="Cron Style", cron_string=ONE_SECOND)
	r.execute_command("ACL", "SETUSER", user, *printed_grants(bench, user))
	r.execute_command("ACL", "LOG", "RESET")  # the log is the server's: earlier tests' refusals are in it
	scheduler = processes.scheduler(bench.path)
	processes.worker(redis_url, bench.queue_name("default"))  # the worker is Frappe's business: the admin user
	wait_until(
		lambda: r.llen("test:runs") >= 2 and r.llen("test:limited-runs") >= 2,
		30,
		f"two fires of each run by the worker\n{scheduler.tail()}",
	)
	assert r.exists(KEYS.task_running_key(data.site.name, limited))
	for command in ("ping", "status", "resync"):
		done = cli(bench.path, command)
		assert done.returncode == 0, (command, done.stdout, done.stderr)
		assert PASSWORD not in done.stdout + done.stderr
	assert scheduler.alive()
	assert r.acl_log() == [], "Redis refused something BTU sent"
	log = scheduler.log()
	assert "Traceback" not in log and " ERROR " not in log and PASSWORD not in log


def test_apply_grants_and_says_what_it_did(acl_bench, r, redis_url):
	from btu.scheduler_daemon.operations.redis_acl import rules

	bench, _, user = acl_bench()
	done = cli(bench.path, "setup", "redis-acl", "--apply", "--admin-url", redis_url)
	assert done.returncode == 0, done.stderr
	assert f"granted to Redis user {user!r}" in done.stdout
	assert " ".join(rules(KEYS, bench.bench_id)) in done.stdout
	assert "not saved: this Redis has no aclfile" in done.stdout
	assert f"checked: user {user!r} has every grant BTU needs" in done.stdout
	assert cli(bench.path, "status").returncode == 1, "status is no longer refused (exit 1: no leader)"
	nobody = cli(bench.path, "setup", "redis-acl", "--apply", "--admin-url", redis_url, "--user", "nobody-here")
	assert nobody.returncode == 2 and "has no ACL user 'nobody-here'" in nobody.stderr
	refused = cli(
		bench.path, "setup", "redis-acl", "--apply", "--admin-url", redis_url.replace("://", f"://{user}:{PASSWORD}@")
	)
	assert refused.returncode == 2 and "may run ACL SETUSER" in refused.stderr
	assert PASSWORD not in refused.stdout + refused.stderr


def test_grants_revoked_while_running(acl_bench, processes, r):
	"""Revoked: the process keeps running and says so once per loop; restored: it says so and fires again."""
	bench, _, user = acl_bench()
	grants = printed_grants(bench, user)
	r.execute_command("ACL", "SETUSER", user, *grants)
	scheduler = processes.scheduler(bench.path, "--full-refresh-interval-secs", "1")
	wait_until(lambda: site_job_ids(r, bench, "site1.localhost"), 20, f"a fire\n{scheduler.tail()}")
	# enabled=True: redis-py sends "off" otherwise, and a disabled user could never log in again when a connection is
	# remade
	r.acl_setuser(user, enabled=True, **frappe_rules(bench.bench_id))  # ~btu:* gone
	wait_until(lambda: " redis_permission_denied " in scheduler.log(), 15, f"the refusal is logged\n{scheduler.tail()}")
	# The RPC listener learns of it when its BRPOP, blocked for up to 5 s before the revoke, next asks.
	wait_until(
		lambda: " rpc_redis_lost " in scheduler.log(), 15, f"the listener's refusal is logged\n{scheduler.tail()}"
	)
	time.sleep(4)  # several retries and full refreshes
	assert scheduler.alive(), scheduler.tail()
	log = scheduler.log()
	denied = [line for line in log.splitlines() if " redis_permission_denied " in line]
	assert all("lacks the grant ~btu:*" in line for line in denied), denied
	for where in ("main", "reconciler"):
		assert sum(f" where={where} " in line for line in denied) <= 1, f"{where} logged more than once:\n{denied}"
	assert log.count(" rpc_redis_lost ") == 1 and "Traceback" not in log
	before = len(queue_ids(r, queue_key(bench)))
	r.execute_command("ACL", "SETUSER", user, *grants)
	wait_until(
		lambda: " redis_permission_restored " in scheduler.log(), 15, f"the recovery is logged\n{scheduler.tail()}"
	)
	wait_until(lambda: len(queue_ids(r, queue_key(bench))) > before, 15, "fires again")
	assert scheduler.alive() and PASSWORD not in scheduler.log()


def test_desk_call_is_denied_not_unreachable(r, redis_url):
	"""protocol.call (the Desk's ping and schedule announcements): NOPERM and WRONGPASS are "denied"."""
	user = f"btu-acl-{uuid.uuid4().hex[:6]}"
	r.acl_setuser(user, enabled=True, passwords=f"+{PASSWORD}", **frappe_rules("bench"))
	try:
		client = redis.Redis.from_url(redis_url, username=user, password=PASSWORD)
		reply = protocol.call(client, KEYS, protocol.PING, timeout=1)
		assert reply.outcome == "denied" and not reply.ok
		assert reply.message.startswith(f"permission denied by Redis: user {user!r} lacks the grant ~btu:* (")
		assert reply.message.endswith("see btu-scheduler setup redis-acl")
		wrong = redis.Redis.from_url(redis_url, username=user, password="wrong")
		reply = protocol.call(wrong, KEYS, protocol.PING, timeout=1)
		assert reply.outcome == "denied"
		assert f"user {user!r} cannot log in" in reply.message and "wrong" not in reply.message.split("(")[0]
		with pytest.raises(redis.ConnectionError):  # down is not denied: the caller says "unreachable"
			protocol.call(redis.Redis(port=claim_port()), KEYS, protocol.PING, timeout=1)
	finally:
		r.acl_deluser(user)


def test_no_password_in_errors_or_logs(log_stream):
	url = f"redis://admin:{PASSWORD}@127.0.0.1:1/0"
	assert mask_url(f"Redis at {url} failed") == "Redis at redis://admin:***@127.0.0.1:1/0 failed"
	assert mask_url(f"x rediss://h:1/0?password={PASSWORD}&db=1") == "x rediss://h:1/0?password=***&db=1"
	configure("INFO", "text", log_stream)
	log_event("btu.scheduler", "ERROR", "redis_unreachable", error=f"cannot reach {url}")
	configure("INFO", "json", log_stream)
	log_event("btu.scheduler", "ERROR", "redis_unreachable", error=f"cannot reach {url}")
	logged = log_stream.getvalue()
	assert logged.count("redis://admin:***@127.0.0.1:1/0") == 2 and PASSWORD not in logged


def test_no_password_in_cli_output(make_bench, monkeypatch):
	"""A bad FRAPPE_REDIS_QUEUE, `config` and `status` against a URL with a password."""
	bench = make_bench()
	url = f"redis://admin:{PASSWORD}@127.0.0.1:1/0"
	for args in (("config", "--redis-url", url), ("status", "--redis-url", url), ("ping", "--redis-url", url)):
		done = cli(bench.path, *args)
		assert PASSWORD not in done.stdout + done.stderr, (args, done.stdout, done.stderr)
	monkeypatch.setenv("FRAPPE_REDIS_QUEUE", f"http://admin:{PASSWORD}@127.0.0.1:1")
	from btu.scheduler_daemon.reads.bench import Bench, BenchError

	with pytest.raises(BenchError) as refused:
		Bench.load(bench.path)
	assert "http://admin:***@127.0.0.1:1" in str(refused.value) and PASSWORD not in str(refused.value)
