"""Prometheus metrics: scraped from a running leader and standby, during real fires and a failover.

Every exposition is read with prometheus_client's own parser. Counts are
compared with the queue itself in a window where the queue did not move
(read before and after the scrape, retried from the next half second if a
fire landed), so they must be equal, not close.
"""

from __future__ import annotations

import json
import re
import signal
import socket
import time
import urllib.request

import pytest
from prometheus_client.parser import text_string_to_metric_families

from btu.scheduler_daemon.operations.metrics import OTHER, Metrics, MetricsServer, StateCollector, quantile_ms
from btu.scheduler_daemon.store.outcomes import FireOutcome
from btu.scheduler_daemon.store.state import Released
from btu.shared import protocol
from tests.engine.helpers import (
	ONE_SECOND,
	cli,
	duplicates,
	gaps,
	lease,
	queue_ids,
	queue_key,
	slots_by_schedule,
	status_json,
	wait_for_leader,
	wait_until,
)  # fmt: skip
from tests.support.keys import KEYS
from tests.support.slack import patient
from tests.support.tcp_proxy import TcpProxy

pytestmark = pytest.mark.versions

LISTENING = re.compile(r"metrics_listening address=(\S+) port=(\d+)")


class Scrape:
	"""One scrape of a /metrics endpoint, parsed by prometheus_client's parser."""

	def __init__(self, text: str):
		self.text = text
		self.samples = [sample for family in text_string_to_metric_families(text) for sample in family.samples]

	def value(self, name: str, **labels: str) -> float:
		"""The sum of `name`'s samples whose labels include `labels`."""
		return sum(s.value for s in self.samples if s.name == name and labels.items() <= s.labels.items())

	def label_values(self, name: str, label: str) -> set[str]:
		return {s.labels[label] for s in self.samples if s.name == name and label in s.labels}


def scrape(port: int) -> Scrape:
	with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=patient(5)) as response:
		assert response.status == 200
		return Scrape(response.read().decode())


def metrics_port(scheduler) -> int:
	found = wait_until(lambda: LISTENING.search(scheduler.log()), 20, f"metrics_listening logged\n{scheduler.tail()}")
	assert found.group(1) == "127.0.0.1", "the endpoint must bind to loopback unless told otherwise"
	return int(found.group(2))


def at_half_second() -> None:
	"""Sleep to the next x.5 s: every-second fires are released at x.000 and take about a millisecond."""
	time.sleep((0.5 - time.time() % 1) % 1)


def logged_lags_ms(log_path, ids: list[str]) -> list[float]:
	"""The lag the scheduler logged for each of `ids` (its `fire` lines)."""
	wanted = set(ids)
	lags = {}
	for match in re.finditer(r" fire .* lag_ms=(\d+(?:\.\d+)?) job_id=(\S+)", log_path.read_text()):
		if match.group(2) in wanted:
			lags[match.group(2)] = float(match.group(1))
	assert set(lags) == wanted, f"fires the log does not show: {sorted(wanted - set(lags))[:5]}"
	return list(lags.values())


def between_fires(r, queue: str, read, undo=lambda: None, attempts: int = 10):
	"""(queue ids, read()) from a window no fire landed in: a loaded machine can take longer than half a second to
	scrape. A read whose window saw a fire is undone and tried again from the next half second."""
	for _ in range(attempts):
		at_half_second()
		before = queue_ids(r, queue)
		result = read()
		if queue_ids(r, queue) == before:
			return before, result
		undo()
	raise AssertionError(f"a fire landed during each of {attempts} reads of a second each")


def fires_on_queue(ids: list[str], schedule: str | None = None) -> int:
	return sum(len(slots) for name, slots in slots_by_schedule(ids).items() if schedule in (None, name))


def test_leader_and_standby_export_what_the_queue_holds_through_a_failover(engine_bench, processes, r):
	bench, data = engine_bench()
	site = data.site.name
	task = data.insert_task(
		function_string="tests.engine.tasks.record", arguments={"key": "test:runs"}, desc_short="record"
	)
	fire_all = [
		data.insert_schedule(
			task, run_frequency="Cron Style", cron_string=ONE_SECOND, catch_up_policy="fire_all", catch_up_max=100
		)
		for _ in range(4)
	]
	skipper = data.insert_schedule(task, run_frequency="Cron Style", cron_string=ONE_SECOND, catch_up_policy="skip")
	named = (fire_all[0], skipper)
	flags = (
		"--metrics-port",
		"0",
		"--lease-ttl-secs",
		"2",
		"--misfire-grace-secs",
		"0.5",
		"--metrics-schedules",
		",".join(named),
	)
	first = processes.scheduler(bench.path, *flags)
	wait_for_leader(r, processes)
	second = processes.scheduler(bench.path, *flags)
	ports = {first.pid: metrics_port(first), second.pid: metrics_port(second)}
	queue = queue_key(bench)
	wait_until(lambda: fires_on_queue(queue_ids(r, queue)) >= 15, 20, "fires on the queue")

	# Some RPC traffic, made-up request types among it: they count as "other", never as series of their own.
	for n in range(30):
		r.lpush(
			KEYS.commands,
			json.dumps({"request_type": f"made_up_{n}", "request_content": None, "response_key": None, "site": site}),
		)
	reply = protocol.call(r, KEYS, protocol.PING, None, site=site)
	assert reply.ok, reply.message

	ids, (leader, standby) = between_fires(r, queue, lambda: (scrape(ports[first.pid]), scrape(ports[second.pid])))
	epoch_before, _ = lease(r)
	assert leader.value("btu_scheduler_leader") == 1 and standby.value("btu_scheduler_leader") == 0
	assert leader.value("btu_scheduler_lease_epoch") == epoch_before == standby.value("btu_scheduler_lease_epoch")
	assert (
		leader.value("btu_fires_total")
		== len(ids)
		== leader.value("btu_fires_total", site=site, queue=bench.queue_name("default"))
	)
	assert leader.value("btu_fire_lag_seconds_count") == len(ids), "one lag observation per fire"
	assert leader.value("btu_fire_lag_seconds_bucket", le="+Inf") == len(ids)
	# Each fire in the bucket its logged lag puts it in (how late fires are is the fire-lag benchmark's to say: on a
	# loaded machine a whole second's fires can be late).
	within = sum(1 for lag_ms in logged_lags_ms(first.log_path, ids) if lag_ms <= 250)
	assert leader.value("btu_fire_lag_seconds_bucket", le="0.25") == within, "one observation per fire, in its bucket"
	assert standby.value("btu_fires_total") == 0 and standby.value("btu_fire_lag_seconds_count") == 0
	assert leader.value("btu_schedule_fires_total", schedule=fire_all[0]) == fires_on_queue(ids, fire_all[0])
	assert leader.label_values("btu_schedule_fires_total", "schedule") == set(named), (
		"only the schedules named get labels of their own"
	)
	for scraped, process in ((leader, first), (standby, second)):  # the shared state, read from Redis by either
		assert scraped.value("btu_state_readable") == 1
		assert scraped.value("btu_schedules", site=site) == 5
		assert scraped.value("btu_invalid_schedules", site=site) == 0
		assert scraped.value("process_resident_memory_bytes") > 0
		[info] = [s.labels for s in scraped.samples if s.name == "btu_scheduler_info"]
		assert info["process"].startswith(f"{socket.gethostname()}:{process.pid}:") and info["executor"] == "rq"
	rpc = [s for s in (*leader.samples, *standby.samples) if s.name == "btu_rpc_commands_total"]
	assert {s.labels["request_type"] for s in rpc} <= {*protocol.REQUEST_TYPES, OTHER}
	assert sum(s.value for s in rpc if s.labels["request_type"] == OTHER and s.labels["outcome"] == "rejected") == 30
	assert (
		sum(s.value for s in rpc if s.labels["request_type"] == protocol.PING and s.labels["outcome"] == "accepted")
		== 1
	)

	# The leader is killed between two fires: what it exported is what it had queued. It is frozen
	# (SIGSTOP) right after the scrape, so no fire can land between the scrape and the kill.
	def scrape_and_freeze() -> Scrape:
		last = scrape(ports[first.pid])
		first.signal(signal.SIGSTOP)
		return last

	_, last = between_fires(r, queue, scrape_and_freeze, undo=lambda: first.signal(signal.SIGCONT))
	exported, skipper_exported = last.value("btu_fires_total"), last.value("btu_schedule_fires_total", schedule=skipper)
	first.kill()
	assert fires_on_queue(queue_ids(r, queue)) == exported
	wait_for_leader(r, processes, other_than=first.pid)
	wait_until(lambda: scrape(ports[second.pid]).value("btu_fires_total") >= 10, 20, "the new leader fired")
	at_half_second()
	ids = queue_ids(r, queue)
	after = scrape(ports[second.pid])
	epoch_after, _ = lease(r)
	assert after.value("btu_scheduler_leader") == 1 and after.value("btu_leader_elections_total") == 1
	assert after.value("btu_scheduler_lease_epoch") == epoch_after > epoch_before
	assert after.value("btu_fires_total") == len(ids) - exported, "the new leader counts exactly the jobs it queued"
	assert after.value("btu_fire_lag_seconds_count") == after.value("btu_fires_total")
	assert duplicates(ids) == []
	slots = slots_by_schedule(ids)
	for name in fire_all:
		assert gaps(slots[name]) == [], f"{name}: fire_all lost a slot"
	missed = sum((b - a) // 1000 - 1 for a, b in gaps(slots[skipper]))
	assert missed > 0, "the failover took longer than the misfire grace: the skip policy must have skipped"
	assert after.value("btu_schedule_skipped_total", schedule=skipper) == missed, (
		"each skipped slot counted once, for its schedule"
	)
	assert after.value("btu_fires_skipped_total", site=site) == missed, (
		"no other schedule skips: fire_all keeps every slot"
	)
	assert after.value("btu_schedule_fires_total", schedule=skipper) == len(slots[skipper]) - skipper_exported

	# `status` prints the same figures, from the heartbeats.
	wait_until(lambda: heartbeat_fires(bench, second.pid) > 0, 15, "the new leader's heartbeat carries its figures")
	out = cli(bench.path, "status").stdout
	assert re.search(r"since start: fires \d+ \(lag p50 [\d.]+ ms, p99 [\d.]+ ms\), skipped .*elections 1", out), out


def heartbeat_fires(bench, pid: int) -> int:
	for process in status_json(bench.path)["processes"]:
		if process["pid"] == pid:
			return process["metrics"].get("fires", 0)
	return 0


def released(
	site: str, schedule: str, lag_ms: int, outcome: str = FireOutcome.ENQUEUED, queue: str = "rq:queue:b:default"
) -> Released:
	"""A release result as release.lua reports it: the prepared member (prepare.lua's nine fields), outcome, lag."""
	member = "\t".join(["job", queue, "state", "counters", f"{site}|{schedule}", "1000", "1000", "0", "900"])
	return Released(member, outcome, lag_ms)


def served(metrics: Metrics) -> tuple[Scrape, MetricsServer]:
	server = MetricsServer(metrics.registry, "127.0.0.1", 0).start()
	try:
		return scrape(server.port), server
	finally:
		server.stop()


def test_a_wrong_value_or_redis_down_never_fails_a_scrape(r, redis_url):
	import redis

	r.sadd(KEYS.sites, "good.localhost", "bad.localhost")
	r.sadd(KEYS.site_schedules_key("good.localhost"), "TS-1", "TS-2")
	r.set(KEYS.site_schedules_key("bad.localhost"), "a string where a set belongs")
	r.set(KEYS.prepared, "a string where a sorted set belongs")
	metrics = Metrics("p", "rq")
	metrics.registry.register(
		StateCollector(redis.Redis.from_url(redis_url), KEYS, lambda: ["good.localhost", "bad.localhost"])
	)
	scraped, _ = served(metrics)
	assert scraped.value("btu_state_readable") == 1
	assert scraped.value("btu_schedules", site="good.localhost") == 2
	assert "bad.localhost" not in scraped.label_values("btu_schedules", "site"), "a wrong type is no figure"
	assert not [s for s in scraped.samples if s.name == "btu_prepared_fires"]
	assert scraped.value("btu_overdue_schedules") == 0

	from tests.support.ports import claim_port

	down = Metrics("p", "rq")
	down.registry.register(
		StateCollector(
			redis.Redis(port=claim_port(), socket_connect_timeout=0.5, socket_timeout=0.5),
			KEYS,
			lambda: ["good.localhost"],
		)
	)
	scraped, _ = served(down)
	assert scraped.value("btu_state_readable") == 0
	assert scraped.value("btu_scheduler_leader") == 0 and scraped.value("process_resident_memory_bytes") > 0


def test_a_port_in_use_is_refused_in_one_line(engine_bench):
	bench, _ = engine_bench()
	with socket.socket() as taken:
		taken.bind(("127.0.0.1", 0))
		taken.listen()
		port = taken.getsockname()[1]
		done = cli(bench.path, "run", "--metrics-port", str(port), timeout=30)
	assert done.returncode == 2, done.stderr
	assert "Traceback" not in done.stderr
	[line] = [line for line in done.stderr.splitlines() if line.startswith("btu-scheduler run:")]
	assert (
		f"metrics_port {port} (from flag --metrics-port) on metrics_address 127.0.0.1 (from default) cannot be bound"
		in line
	)


def test_an_endpoint_with_a_token_answers_only_its_bearer_and_names_only_its_benchs_sites(engine_bench, processes, r):
	"""On 0.0.0.0 with metrics_bearer_token: 401 without the token or with a wrong one, 200 with it; a neighbour
	bench's site, listed in the btu:sites the two share, is named nowhere in the scrape."""
	import urllib.error

	bench, data = engine_bench()
	data.insert_schedule(
		data.insert_task(function_string="tests.engine.tasks.record", arguments={"key": "test:runs"}),
		run_frequency="Cron Style",
		cron_string="0 0 1 1 *",
	)
	token = "s3cret-token-of-this-bench"
	scheduler = processes.scheduler(
		bench.path, "--metrics-port", "0", "--metrics-address", "0.0.0.0", "--metrics-bearer-token", token
	)
	found = wait_until(lambda: LISTENING.search(scheduler.log()), 20, f"metrics_listening logged\n{scheduler.tail()}")
	url = f"http://127.0.0.1:{found.group(2)}/metrics"

	def status(headers: dict) -> int:
		try:
			with urllib.request.urlopen(urllib.request.Request(url, headers=headers), timeout=patient(5)) as response:
				return response.status
		except urllib.error.HTTPError as exc:
			assert exc.headers["WWW-Authenticate"] == 'Bearer realm="btu-scheduler"'
			assert b"neighbour" not in exc.read()
			return exc.code

	assert status({}) == 401
	assert status({"Authorization": f"Bearer {token}x"}) == 401
	assert status({"Authorization": f"Basic {token}"}) == 401
	assert status({"Authorization": f"Bearer {token}"}) == 200
	wait_until(
		lambda: data.site.name in authorized_scrape(url, token).label_values("btu_schedules", "site") or None,
		20,
		"this bench's site scraped",
	)
	# Listed as another bench's scheduler lists its sites (this one drops them from the set at its next full reconcile).
	r.sadd(KEYS.sites, "neighbour.localhost")
	r.sadd(KEYS.site_schedules_key("neighbour.localhost"), "TS-9")
	r.hset(KEYS.invalid_rows_key("neighbour.localhost"), "TS-8", "a neighbour's bad row")
	scraped = authorized_scrape(url, token)
	assert scraped.value("btu_schedules", site=data.site.name) == 1
	assert "neighbour.localhost" not in scraped.text, "a scrape names only this bench's sites"
	assert token not in scheduler.log(), "the token is never logged"


def authorized_scrape(url: str, token: str) -> Scrape:
	request = urllib.request.Request(url, headers={"Authorization": f"Bearer {token}"})
	with urllib.request.urlopen(request, timeout=patient(5)) as response:
		return Scrape(response.read().decode())


def test_an_address_other_hosts_reach_needs_a_token_or_an_explicit_allowance(engine_bench):
	bench, _ = engine_bench()
	done = cli(bench.path, "run", "--metrics-port", "0", "--metrics-address", "0.0.0.0", timeout=30)
	assert done.returncode == 2, done.stderr
	[line] = [line for line in done.stderr.splitlines() if line.startswith("btu-scheduler run:")]
	assert "metrics_address 0.0.0.0 is reachable from other hosts and metrics_bearer_token is not set" in line
	assert "metrics_allow_unauthenticated" in line and "Traceback" not in done.stderr


def test_only_loopback_is_served_without_a_token_unless_allowed():
	from btu.scheduler_daemon.operations.metrics import exposure_refusal

	for address in ("127.0.0.1", "::1", "localhost", "127.0.0.2"):
		assert exposure_refusal(address, None, False) is None, address
	for address in ("0.0.0.0", "::", "10.1.2.3", "no-such-host.invalid"):
		assert exposure_refusal(address, None, False), address
		assert exposure_refusal(address, "token", False) is None and exposure_refusal(address, None, True) is None


def test_the_summary_status_prints_is_what_a_scrape_reads():
	metrics = Metrics("p", "rq", schedules=["TS-9"])
	metrics.released(
		[released("s1", "TS-1", 0.7) for _ in range(100)] + [released("s2", "TS-9", 3000, queue="rq:queue:b:long")]
	)
	metrics.released(
		[
			released("s1", "TS-1", 5, outcome=FireOutcome.SKIPPED_OVERLAP),
			released("s1", "TS-1", 20_000, outcome=FireOutcome.RETURNED),
		]
	)
	metrics.released([Released(b"\xff not a member", FireOutcome.QUARANTINED, 0, "not nine fields")])
	metrics.redis_error("outage")
	metrics.rpc_command({"a": "dict"}, "rejected")
	scraped, _ = served(metrics)
	summary = metrics.summary()
	assert summary["fires"] == scraped.value("btu_fires_total") == 101
	assert scraped.value("btu_fires_total", site="s2", queue="b:long") == 1
	assert summary["skipped"] == {"overlap": 1} and summary["returned"] == 1 == scraped.value(
		"btu_fires_returned_total"
	)
	assert scraped.value("btu_quarantined_total", what="prepared_fire") == 1
	assert summary["redis_errors"] == 1 and summary["rpc_commands"] == 1
	assert scraped.value("btu_rpc_commands_total", request_type=OTHER, outcome="rejected") == 1
	# 100 of 101 lags in (0.5 ms, 1 ms]: histogram_quantile interpolates p50 at rank 50.5 of 100 there.
	assert summary["lag_p50_ms"] == round((0.0005 + 0.0005 * 50.5 / 100) * 1000, 3)
	assert summary["lag_p99_ms"] == round((0.0005 + 0.0005 * 99.99 / 100) * 1000, 3)
	assert scraped.label_values("btu_schedule_fires_total", "schedule") == {"TS-9"}


def test_quantiles_follow_histogram_quantile():
	assert quantile_ms(0.5, []) is None
	assert quantile_ms(0.5, [(0.001, 0), (float("inf"), 0)]) is None
	assert quantile_ms(0.5, [(0.001, 10), (0.002, 20), (float("inf"), 20)]) == 1.0
	assert quantile_ms(0.75, [(0.001, 10), (0.002, 20), (float("inf"), 20)]) == 1.5
	# Past the highest finite bucket, Prometheus answers that bound.
	assert quantile_ms(0.99, [(0.001, 1), (600, 1), (float("inf"), 100)]) == 600_000


def test_label_values_are_bounded():
	metrics = Metrics("p", "rq")
	metrics.released([released(f"site{n}", "TS-1", 1) for n in range(500)])
	sites = {
		s.labels["site"] for family in metrics.registry.collect() for s in family.samples if s.name == "btu_fires_total"
	}
	assert len(sites) == 201 and OTHER in sites
	assert (
		sum(s.value for family in metrics.registry.collect() for s in family.samples if s.name == "btu_fires_total")
		== 500
	)


def test_a_leader_cut_off_from_redis_stops_reading_as_leader_and_counts_the_loss(
	engine_bench, processes, r, redis_server
):
	bench, data = engine_bench()
	task = data.insert_task(
		function_string="tests.engine.tasks.record", arguments={"key": "test:runs"}, desc_short="record"
	)
	data.insert_schedule(
		task, run_frequency="Cron Style", cron_string=ONE_SECOND, catch_up_policy="fire_all", catch_up_max=100
	)
	proxy = TcpProxy("127.0.0.1", redis_server.port)
	proxy.up()
	flags = ("--metrics-port", "0", "--lease-ttl-secs", "2")
	cut_off = processes.scheduler(bench.path, *flags, "--redis-url", f"redis://127.0.0.1:{proxy.port}/0")
	wait_for_leader(r, processes)
	other = processes.scheduler(bench.path, *flags)
	ports = {cut_off.pid: metrics_port(cut_off), other.pid: metrics_port(other)}
	wait_until(lambda: scrape(ports[cut_off.pid]).value("btu_fires_total") >= 2, 20, "the first leader fired")
	try:
		proxy.down()
		# Its lease runs out 2 s after its last renewal: from then on it says so, though no renewal has failed yet.
		wait_until(
			lambda: scrape(ports[cut_off.pid]).value("btu_scheduler_leader") == 0, 5, "the cut-off leader reads 0"
		)
		wait_for_leader(r, processes, other_than=cut_off.pid)
		wait_until(lambda: scrape(ports[other.pid]).value("btu_scheduler_leader") == 1, 5, "the new leader reads 1")
		alone = scrape(ports[cut_off.pid])
		assert alone.value("btu_state_readable") == 0 and alone.value("btu_redis_errors_total", kind="outage") > 0
		assert alone.value("btu_leader_losses_total") == 0, "nothing told it yet: only its lease's clock"
	finally:
		proxy.up()
	wait_until(
		lambda: scrape(ports[cut_off.pid]).value("btu_leader_losses_total") == 1,
		20,
		"back, it finds the lease gone and counts one loss",
	)
	back, leader = scrape(ports[cut_off.pid]), scrape(ports[other.pid])
	assert back.value("btu_scheduler_leader") == 0 and leader.value("btu_scheduler_leader") == 1
	assert back.value("btu_scheduler_lease_epoch") <= leader.value("btu_scheduler_lease_epoch")
	assert duplicates(queue_ids(r, queue_key(bench))) == []


def test_every_value_moved_aside_is_counted_once(r):
	from btu.scheduler_daemon.store.state import State

	heard: list[str] = []
	state = State(r, KEYS, on_quarantine=heard.append)
	r.set("btu:site:s.localhost:schedule:TS-1", "not a hash")
	state.quarantine("btu:site:s.localhost:schedule:TS-1", "a string", site="s.localhost", schedule="TS-1")
	r.set(KEYS.sites, "not a set")
	assert state.sites() == set()  # the guarded read moves the key aside and reads again
	r.hset(KEYS.site_schedules_key("s.localhost"), "a", "b")
	assert state.check_types({"s.localhost"}) == [KEYS.site_schedules_key("s.localhost")]
	assert heard == ["schedule_state", "key", "key"]
	metrics = Metrics()
	for what in heard:
		metrics.quarantine(what)
	metrics.quarantine("anything else")
	scraped, _ = served(metrics)
	assert (
		scraped.value("btu_quarantined_total", what="schedule_state") == 1
		and scraped.value("btu_quarantined_total", what="key") == 3
	)


def test_the_endpoint_caps_concurrent_scrapes_and_drops_idle_clients(monkeypatch):
	import threading
	import urllib.error

	from btu.scheduler_daemon.operations import metrics as metrics_module

	# Scrapes held in the collector until the test lets them go: "at once" is made, not hoped for from the timing.
	in_progress, release = threading.Semaphore(0), threading.Event()

	class Held:
		def collect(self):
			in_progress.release()
			release.wait(patient(30))
			return []

	monkeypatch.setattr(metrics_module._QuietHandler, "timeout", 0.5)
	metrics = Metrics()
	metrics.registry.register(Held())
	server = MetricsServer(metrics.registry, "127.0.0.1", 0).start()
	codes: list[int] = []

	def get():
		try:
			with urllib.request.urlopen(f"http://127.0.0.1:{server.port}/metrics", timeout=patient(40)) as response:
				codes.append(response.status)
		except urllib.error.HTTPError as exc:
			codes.append(exc.code)

	try:
		held = [threading.Thread(target=get) for _ in range(metrics_module.MAX_SCRAPES)]
		for thread in held:
			thread.start()
		for _ in held:
			assert in_progress.acquire(timeout=patient(10)), "a scrape did not reach the collector"
		for _ in range(3):  # each while MAX_SCRAPES are being served: refused at once
			get()
		assert codes == [503] * 3
		release.set()
		for thread in held:
			thread.join()
		assert sorted(codes) == [200] * metrics_module.MAX_SCRAPES + [503] * 3
		with socket.create_connection(("127.0.0.1", server.port)) as idle:
			idle.settimeout(5)
			assert idle.recv(1) == b"", "an idle client is dropped after the handler's timeout"
	finally:
		release.set()
		server.stop()
