"""Many sites on shared servers (issue 29): N sites x M schedules on one MariaDB whose max_connections is 151.

One private MariaDB (max_connections 151) and one private Redis; a dev bench of N sites, each with its
own database and user as Frappe makes them, and M schedules per site due far ahead (a daily cron 12 hours
away), so nothing fires unless set up to. Then, in order:

1. cold start: a scheduler with default settings (db_max_connections 4) started; seconds until every
   schedule is in the due set (`btu:due`), and how many sites have all their schedules in the state.
   Meanwhile 100 more clients connect as the sites' users (Frappe's requests) and hold their connections.
2. idle CPU of that scheduler over --idle-seconds (one full reconcile every 60 s falls in the window).
3. fires: one Once schedule per site at one instant, each sent as Frappe sends it (the row, then the RPC);
   how many sites had their job enqueued.
   Throughout 1-3, the connections of the sites' users that the server lists (information_schema.processlist,
   every ~10 ms, the benchmark's own left out) and the pool's own peak from the scheduler's heartbeat.
4. full reconcile with nothing changed, in this process (the scheduler stopped): one pass to warm, then
   --passes timed, with the CPU, MariaDB's counters (statements, SELECTs, connections, tables opened,
   buffer pool reads) and the Redis round trips and commands of each pass.
5. edit latency: a scheduler with --full-refresh-interval-secs 1 (full reconciles back to back); a new
   schedule in a random site, its RPC, and the time until it is in `btu:site:<site>:schedules`.

    scripts/benchmark scale [--sites 1000] [--schedules 20] [--idle-seconds 60] [--profile]
    scripts/benchmark scale --table-cache 20000 --buffer-pool-mb 256   # the server's caches enlarged
    scripts/benchmark scale --reader   # the bench's reader login granted: many sites a query (server_read)

Creating the sites takes 60-100 ms each on 2 busy cores (1-2 minutes for 1,000), dropping them about 20 s;
the whole run about 6 minutes. Writes benchmarks/results/scale.json (scale_server_tuned.json with either
server option; _reader added with --reader).
"""

from __future__ import annotations

import argparse
import cProfile
import io
import json
import os
import pstats
import random
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
import uuid
from datetime import datetime, timezone
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks import common  # noqa: E402
from btu.scheduler_daemon.operations.config import Config  # noqa: E402
from btu.scheduler_daemon.reads import db_reader
from btu.scheduler_daemon.reconcile.reconciler import Reconciler  # noqa: E402
from btu.scheduler_daemon.store import jobs  # noqa: E402
from btu.scheduler_daemon.store.state import State  # noqa: E402
from btu.shared import protocol  # noqa: E402
from devbench.bench import create_dev_bench, drop_dev_bench  # noqa: E402
from devbench.data import SiteData  # noqa: E402
from devbench.schema import load_doctypes  # noqa: E402
from tests.support.keys import KEYS
from tests.support.mariadb_server import MariaDBServer  # noqa: E402
from tests.support.ports import claim_port  # noqa: E402

MAX_CONNECTIONS = 151
SERVER_COUNTERS = (
	"Questions",
	"Com_select",
	"Connections",
	"Opened_tables",
	"Opened_table_definitions",
	"Innodb_buffer_pool_reads",
)
SERVER_SETTINGS = ("max_connections", "table_open_cache", "table_definition_cache", "innodb_buffer_pool_size")
EXTRA_CLIENTS = 100
EDIT_SAMPLES = 20
# The figures, measured before these changes (1,000 sites x 20 schedules, max_connections 151).
BEFORE = {
	"fire": "148 of 1,000",
	"clients": "-",
	"held": "1,000",
	"cold": "23 s",
	"full": "6.7-11.6 s",
	"cpu": "3.2 %",
	"edit": "21-102 ms, or the whole pass",
}


def now_load() -> str:
	return " / ".join(f"{x:.2f}" for x in os.getloadavg())


# -- the bench -------------------------------------------------------------------------


class ScaleBench:
	"""A dev bench of `sites` on `server`; `path` is all common.start_scheduler needs of it."""

	def __init__(self, server: MariaDBServer, sites: list[str]):
		self.path = Path(tempfile.mkdtemp(prefix="btu-scale-"))
		self.server = server
		self.sites = sites
		self.root = None
		self.tasks: dict[str, str] = {}

	def create(self, redis_url: str, chunk: int = 100) -> ScaleBench:
		"""The sites' databases, users and tables, `chunk` sites a call (create_dev_bench keeps what is there)."""
		bench_id = f"scale-{uuid.uuid4().hex[:8]}"
		started = time.monotonic()
		for i in range(0, len(self.sites), chunk):
			# The package `benchmarks` is an app of the bench: its hooks.py declares the job function runnable.
			self.bench = create_dev_bench(
				self.path,
				self.sites[i : i + chunk],
				db_port=self.server.port,
				redis_url=redis_url,
				bench_id=bench_id,
				apps={"benchmarks": common.REPO},
			)
			progress(
				f"sites created: {min(i + chunk, len(self.sites))}/{len(self.sites)} "
				f"({time.monotonic() - started:.0f} s)"
			)
		self.schemas = load_doctypes()
		self.root = self.server.connect()
		return self

	def data(self, site: str) -> SiteData:
		"""The site's rows, written over the benchmark's one root connection (no connection as the site's user)."""
		self.root.select_db(self.bench.site(site).db_params["database"])
		data = SiteData(self.bench, site, self.schemas)
		data._conn = self.root
		return data

	def fill(self, schedules: int, cron: str) -> float:
		"""A task and `schedules` Cron Style schedules per site, one INSERT ... VALUES per site; returns seconds."""
		started = time.monotonic()
		for n, site in enumerate(self.sites, 1):
			data = self.data(site)
			self.tasks[site] = data.insert_task(
				desc_short="scale task", function_string=common.JOB_FUNCTION, queue_name="default", max_task_duration=60
			)
			shared = {"task": self.tasks[site], "run_frequency": "Cron Style", "cron_string": cron}
			data.insert_many(
				"BTU Task Schedule", [{**shared, "name": f"BULK-{i:06d}"} for i in range(1, schedules + 1)]
			)
			if n % 100 == 0 or n == len(self.sites):
				progress(f"rows inserted: {n}/{len(self.sites)} sites ({time.monotonic() - started:.0f} s)")
		return time.monotonic() - started

	def insert_schedule(self, site: str, **fields) -> str:
		return self.data(site).insert_schedule(self.tasks[site], **fields)

	def queue(self) -> str:
		return f"rq:queue:{self.bench.queue_name('default')}"

	def close(self) -> None:
		if self.root is not None:
			try:
				self.root.close()
			except Exception:
				pass
		progress(f"dropping {len(self.sites)} databases")
		try:
			drop_dev_bench(self.path)
		except Exception as exc:
			progress(
				f"drop_dev_bench failed ({exc}); removing the directory (the private server goes with its databases)"
			)
			shutil.rmtree(self.path, ignore_errors=True)


def progress(text: str) -> None:
	print(f"[{time.strftime('%H:%M:%S')}] {text}", file=sys.stderr, flush=True)


# -- watching the server and the scheduler ---------------------------------------------------


class ProcessList(threading.Thread):
	"""Every ~10 ms, the ids of the connections the server lists for the sites' users (`_btu...`).

	The benchmark's own connections as those users are left out afterwards (`peak(exclude=...)`), so no
	sample is miscounted while one of them is opening."""

	def __init__(self, server: MariaDBServer, every: float = 0.01):
		super().__init__(daemon=True)
		self.conn = server.connect()
		self.every = every
		self.samples: list[tuple[float, frozenset]] = []
		self.stopped = threading.Event()
		self.paused = threading.Event()

	def run(self) -> None:
		with self.conn.cursor() as cur:
			while not self.stopped.is_set():
				if self.paused.is_set():
					time.sleep(0.05)
					continue
				cur.execute(
					"SELECT id FROM information_schema.processlist WHERE user LIKE %s OR user = %s",
					(r"\_btu%", db_reader.DEFAULT_USER),
				)
				self.samples.append((time.monotonic(), frozenset(row[0] for row in cur.fetchall())))
				time.sleep(self.every)

	def peak(self, exclude: set, since: float = 0.0, until: float = float("inf")) -> int:
		return max((len(ids - exclude) for t, ids in self.samples if since <= t <= until), default=0)

	def count(self, since: float = 0.0, until: float = float("inf")) -> int:
		return sum(1 for t, _ in self.samples if since <= t <= until)

	def stop(self) -> None:
		self.stopped.set()
		self.join()
		self.conn.close()


def heartbeat_databases(r) -> list[dict]:
	"""The connection pools of the (one) running scheduler, from its heartbeat."""
	pools = []
	for process_id in r.zrange(KEYS.processes, 0, -1):
		raw = r.get(KEYS.process_key(process_id.decode()))
		if raw:
			pools.extend(json.loads(raw).get("databases", []))
	return pools


def wait_heartbeat(r, since: float) -> list[dict]:
	"""The pools from a heartbeat written after `since` (wall clock): heartbeats come every 5 s."""
	deadline = time.monotonic() + 15
	while time.monotonic() < deadline:
		for process_id in r.zrange(KEYS.processes, 0, -1):
			raw = r.get(KEYS.process_key(process_id.decode()))
			if raw:
				info = json.loads(raw)
				at = datetime.fromisoformat(info["heartbeat_at"].replace("Z", "+00:00")).timestamp()
				if at > since:
					return info.get("databases", [])
		time.sleep(0.2)
	return heartbeat_databases(r)


def schedules_per_site(r, sites: list[str]) -> dict[str, int]:
	with r.pipeline(transaction=False) as pipe:
		for site in sites:
			pipe.scard(KEYS.site_schedules_key(site))
		return dict(zip(sites, pipe.execute()))


class ExtraClients(threading.Thread):
	"""`count` clients connecting as the users of random sites (Frappe requests) once loading began, held until
	`release`."""

	def __init__(self, bench: ScaleBench, r, count: int, mine: set):
		super().__init__(daemon=True)
		self.bench, self.r, self.count, self.mine = bench, r, count, mine
		self.release = threading.Event()
		self.ok = 0
		self.errors: list[str] = []
		self.opened_at = None

	def run(self) -> None:
		import pymysql

		deadline = time.monotonic() + 60
		while self.r.zcard(KEYS.due) == 0 and time.monotonic() < deadline:
			time.sleep(0.01)
		conns = []
		for site in (
			random.sample(self.bench.sites, self.count)
			if self.count <= len(self.bench.sites)
			else random.choices(self.bench.sites, k=self.count)
		):
			params = self.bench.bench.site(site).db_params
			try:
				conn = pymysql.connect(
					host=params["host"],
					port=params["port"],
					user=params["user"],
					password=params["password"],
					database=params["database"],
					connect_timeout=10,
				)
				self.mine.add(conn.thread_id())
				with conn.cursor() as cur:
					cur.execute("SELECT COUNT(*) FROM `tabBTU Task Schedule`")
				conns.append(conn)
				self.ok += 1
			except Exception as exc:
				self.errors.append(f"{type(exc).__name__}: {exc}")
		self.opened_at = time.monotonic()
		self.release.wait(300)
		for conn in conns:
			conn.close()


def reconcile_metrics(port: int) -> dict[str, list[float]]:
	"""Per kind of reconcile (full, slice of a staggered cycle, schedules), [count, sum of seconds], from the
	scheduler's /metrics."""
	with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as response:
		text = response.read().decode()
	kinds: dict[str, list[float]] = {}
	for part, kind, value in re.findall(
		r'^btu_reconcile_duration_seconds_(count|sum)\{[^}]*kind="(\w+)"[^}]*\} (\S+)$', text, re.M
	):
		kinds.setdefault(kind, [0.0, 0.0])[0 if part == "count" else 1] = float(value)
	return kinds


# -- the phases ---------------------------------------------------------------------------------


def cold_start(
	bench: ScaleBench, r, redis_url: str, sampler: ProcessList, mine: set, schedules: int, log, timeout: float
) -> tuple[object, dict]:
	"""Start a scheduler with default settings; seconds until every schedule is in the due set."""
	total = len(bench.sites) * schedules
	extra = ExtraClients(bench, r, EXTRA_CLIENTS, mine)
	extra.start()
	started_wall = time.time()
	memory_before = int(r.info("memory")["used_memory"])
	t0 = time.monotonic()
	scheduler = common.start_scheduler(bench, redis_url, "frappe", log=log)
	seconds = None
	while time.monotonic() - t0 < timeout:
		if r.zcard(KEYS.due) >= total:
			seconds = time.monotonic() - t0
			break
		if scheduler.poll() is not None:
			raise RuntimeError(f"the scheduler exited with {scheduler.returncode} during the cold start")
		time.sleep(0.02)
	loaded = time.monotonic()
	redis_bytes = int(r.info("memory")["used_memory"]) - memory_before
	counts = schedules_per_site(r, bench.sites)
	# The extra clients hold their connections at least a second beside the loaded scheduler.
	while extra.opened_at is None and time.monotonic() - loaded < 60:
		time.sleep(0.05)
	time.sleep(1)
	extra.release.set()
	extra.join()
	pools = wait_heartbeat(r, started_wall + (loaded - t0) + 0.1)
	return (
		scheduler,
		{
			"cold_start_s": seconds,
			"redis_bytes_per_schedule": redis_bytes
			/ total,  # used_memory after the load less before it, the state's keys only
			"rss_mb_loaded": common.rss_mb(scheduler.pid),
			"timeout_s": timeout,
			"due_entries": r.zcard(KEYS.due),
			"expected": total,
			"sites_complete": sum(1 for n in counts.values() if n >= schedules),
			"sites": len(bench.sites),
			"extra_clients_ok": extra.ok,
			"extra_clients": EXTRA_CLIENTS,
			"extra_client_errors": extra.errors[:5],
			"server_peak": sampler.peak(mine, t0),
			"pools": pools,
			"load": now_load(),
			"t0": t0,
		},
	)


def idle_cpu(scheduler, redis_pid: int, seconds: float, settle: float) -> dict:
	time.sleep(settle)
	before = common.cpu_seconds(scheduler.pid), common.cpu_seconds(redis_pid)
	t0 = time.monotonic()
	time.sleep(seconds)
	elapsed = time.monotonic() - t0
	after = common.cpu_seconds(scheduler.pid), common.cpu_seconds(redis_pid)
	return {
		"seconds": elapsed,
		"scheduler_percent": 100 * (after[0] - before[0]) / elapsed,
		"redis_percent": 100 * (after[1] - before[1]) / elapsed,
		"rss_mb": common.rss_mb(scheduler.pid),
		"load": now_load(),
	}


def fires(bench: ScaleBench, r) -> dict:
	"""One Once schedule per site at one instant, each inserted and sent by RPC as Frappe does; sites enqueued."""
	count = len(bench.sites)
	lead = 10 + 0.03 * count
	instant = datetime.fromtimestamp(int(time.time() + lead), timezone.utc)
	t0 = time.monotonic()
	refused = []
	for site in bench.sites:
		name = bench.insert_schedule(site, run_frequency="Once", run_at=instant)
		reply = protocol.call(r, KEYS, protocol.CREATE_TASK_SCHEDULE, name, site=site)
		if not reply.ok:
			refused.append(f"{site}: {reply.outcome} {reply.message}")
	sent_s = time.monotonic() - t0
	sent_before = time.time() < instant.timestamp()
	# Wait past the instant and the misfire grace, until the queue stops growing.
	time.sleep(max(0.0, instant.timestamp() + 2 - time.time()))
	deadline = instant.timestamp() + 30
	last = -1
	while time.time() < deadline:
		length = r.llen(bench.queue())
		if length >= count or length == last:
			break
		last = length
		time.sleep(1)
	fired = set()
	for raw in r.lrange(bench.queue(), 0, -1):
		job_id = raw.decode()
		try:
			fired.add(jobs.parse_job_id(job_id)[0])
		except ValueError:
			fired.add(job_id.replace("||", "::").split("::", 1)[0])
	return {
		"sites_fired": len(fired & set(bench.sites)),
		"sites": count,
		"jobs": r.llen(bench.queue()),
		"rpc_and_insert_s": sent_s,
		"all_sent_before_the_instant": sent_before,
		"rpc_refused": refused[:5],
		"load": now_load(),
	}


class RoundTrips:
	"""Counts what this process sends Redis: one `send_packed_command` per round trip (a pipeline is one)."""

	def __init__(self):
		import redis.connection

		self.count = 0
		self.cls = redis.connection.Connection
		self.original = self.cls.send_packed_command
		counter = self

		def counted(conn, command, *args, **kwargs):
			counter.count += 1
			return counter.original(conn, command, *args, **kwargs)

		self.cls.send_packed_command = counted

	def close(self) -> None:
		self.cls.send_packed_command = self.original


def grant_reader(bench: ScaleBench) -> str:
	"""`btu-scheduler setup db-reader --apply` as root: the reader's grants on every site, its login in
	common_site_config.json."""
	login, _ = db_reader.login_for(bench.bench, None)
	for entry in db_reader.needed_grants(bench.bench).values():
		db_reader.apply(entry, "root", "", db_reader.statements(login, entry.grants))
	db_reader.save_login(bench.bench, login)
	progress(f"reader {login.user!r} granted on {len(bench.sites)} sites")
	return login.user


def full_reconcile(bench: ScaleBench, r, server: MariaDBServer, passes: int, profile: bool) -> dict:
	"""Reconciler.full in this process, over the state the scheduler left: one warm pass, then `passes` timed."""
	state = State(r, KEYS)
	connections = Config().connections()
	reconciler = Reconciler(
		bench.path, state, "frappe", lambda: datetime.now(timezone.utc), lambda: None, connections=connections
	)
	status = server.connect()

	def db_status() -> dict:
		with status.cursor() as cur:
			cur.execute(f"SHOW GLOBAL STATUS WHERE Variable_name IN ({', '.join(repr(v) for v in SERVER_COUNTERS)})")
			return {name: int(value) for name, value in cur.fetchall()}

	def redis_commands() -> int:
		return int(r.info("stats")["total_commands_processed"])

	def server_cpu() -> float:
		"""mariadbd's CPU seconds (user + system) so far: what a pass costs the server, however loaded the machine."""
		fields = Path(f"/proc/{server.process.pid}/stat").read_text().rsplit(")", 1)[1].split()
		return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")

	try:
		t = time.perf_counter()
		reconciler.full()
		warm_s = time.perf_counter() - t
		rows = []
		trips = RoundTrips()
		try:
			for _ in range(passes):
				db0, rc0, rt0 = db_status(), redis_commands(), trips.count
				t, cpu, server0 = time.perf_counter(), os.times(), server_cpu()
				reconciler.full()
				wall = time.perf_counter() - t
				cpu_s = sum(os.times()[:2]) - sum(cpu[:2])
				server_cpu_s = server_cpu() - server0
				rt1 = trips.count
				rc1, db1 = redis_commands(), db_status()
				rows.append(
					{
						"wall_s": wall,
						"cpu_s": cpu_s,  # of this process: the reconciler's threads (the ProcessList sampler is paused)
						"db_server_cpu_s": server_cpu_s,  # mariadbd's, with its one SHOW STATUS before and after
						# Less the one SHOW STATUS of the reading and the INFO of redis_commands.
						"db_queries": db1["Questions"] - db0["Questions"] - 1,
						"db_selects": db1["Com_select"] - db0["Com_select"],
						"db_connections_opened": db1["Connections"] - db0["Connections"],
						"db_tables_opened": db1["Opened_tables"] - db0["Opened_tables"],
						"db_table_definitions_opened": db1["Opened_table_definitions"]
						- db0["Opened_table_definitions"],
						"db_buffer_pool_reads": db1["Innodb_buffer_pool_reads"] - db0["Innodb_buffer_pool_reads"],
						"redis_round_trips": rt1 - rt0,
						"redis_commands": rc1 - rc0 - 1,
					}
				)
		finally:
			trips.close()
		profile_text = None
		if profile:
			profiler = cProfile.Profile()
			t = time.perf_counter()
			profiler.runcall(reconciler.full)
			profiled_s = time.perf_counter() - t
			out = io.StringIO()
			pstats.Stats(profiler, stream=out).sort_stats("cumulative").print_stats(30)
			out2 = io.StringIO()
			pstats.Stats(profiler, stream=out2).sort_stats("tottime").print_stats(20)
			profile_text = f"one pass under cProfile: {profiled_s:.2f} s\n" + out.getvalue() + out2.getvalue()
		walls = [row["wall_s"] for row in rows]
		n = len(bench.sites)
		return {
			"warm_s": warm_s,
			"passes": rows,
			"median_s": statistics.median(walls),
			"max_s": max(walls),
			"cpu_s_per_pass": statistics.median(row["cpu_s"] for row in rows),
			"db_server_cpu_s_per_pass": statistics.median(row["db_server_cpu_s"] for row in rows),
			"db_queries_per_site": statistics.median(row["db_queries"] for row in rows) / n,
			"db_selects_per_site": statistics.median(row["db_selects"] for row in rows) / n,
			"db_connections_per_pass": statistics.median(row["db_connections_opened"] for row in rows),
			"db_tables_opened_per_pass": statistics.median(row["db_tables_opened"] for row in rows),
			"db_buffer_pool_reads_per_pass": statistics.median(row["db_buffer_pool_reads"] for row in rows),
			"redis_round_trips_per_pass": statistics.median(row["redis_round_trips"] for row in rows),
			"redis_commands_per_pass": statistics.median(row["redis_commands"] for row in rows),
			"pools": connections.snapshot(),
			"profile": profile_text,
			"load": now_load(),
		}
	finally:
		connections.close_idle(everything=True)
		status.close()


def edit_latency(
	bench: ScaleBench, r, redis_url: str, sampler: ProcessList, mine: set, log, samples: int
) -> tuple[object, dict]:
	"""A scheduler reconciling in full back to back; each sample a new schedule in a random site, then its RPC."""
	port = claim_port()
	scheduler = common.start_scheduler(
		bench, redis_url, "frappe", ["--full-refresh-interval-secs", "1", "--metrics-port", str(port)], log=log
	)
	t0 = time.monotonic()
	# Its first full reconcile compiles every row (a new process has seen none); then two more passes (or slices of a
	# staggered cycle), back to back.
	deadline = time.monotonic() + 300
	while time.monotonic() < deadline:
		try:
			kinds = reconcile_metrics(port)
		except OSError:
			kinds = {}
		if kinds.get("full", [0])[0] >= 1 and kinds.get("full", [0])[0] + kinds.get("slice", [0])[0] >= 3:
			break
		if scheduler.poll() is not None:
			raise RuntimeError(f"the scheduler exited with {scheduler.returncode}")
		time.sleep(0.2)
	before = reconcile_metrics(port)
	lags, acks, missing = [], [], 0
	hour = (datetime.now(timezone.utc).hour + 12) % 24
	for _ in range(samples):
		time.sleep(random.uniform(0.2, 1.0))
		site = random.choice(bench.sites)
		name = bench.insert_schedule(site, run_frequency="Cron Style", cron_string=f"30 {hour} * * *")
		key = KEYS.site_schedules_key(site)
		t = time.perf_counter()
		reply = protocol.call(r, KEYS, protocol.CREATE_TASK_SCHEDULE, name, site=site)
		acks.append(reply.round_trip_ms)
		until = t + 30
		while not r.sismember(key, name):
			if time.perf_counter() > until:
				missing += 1
				break
			time.sleep(0.001)
		else:
			lags.append((time.perf_counter() - t) * 1000)
	after = reconcile_metrics(port)
	meanwhile = {}
	for kind in ("full", "slice"):
		count = after.get(kind, [0, 0])[0] - before.get(kind, [0, 0])[0]
		if count:
			meanwhile[kind] = {"count": count, "mean_s": (after[kind][1] - before.get(kind, [0, 0])[1]) / count}
	return scheduler, {
		"samples": samples,
		"landed": len(lags),
		"missing": missing,
		**{f"lag_{k}": v for k, v in common.lag_summary(lags).items()},
		"rpc_ack_p50_ms": common.percentile(acks, 50),
		"reconciles_meanwhile": meanwhile,
		"server_peak": sampler.peak(mine, t0),
		"load": now_load(),
	}


def code_version() -> dict:
	"""The commit measured, and the files of btu/ changed from it (the scheduler runs from the working tree)."""

	def git(*cmd: str) -> str:
		return subprocess.run(["git", *cmd], cwd=common.REPO, capture_output=True, text=True).stdout.strip()

	return {
		"commit": git("rev-parse", "--short", "HEAD"),
		"uncommitted_in_btu": git("status", "--porcelain", "--", "btu").splitlines(),
	}


def tune(server: MariaDBServer, table_cache: int | None, buffer_pool_mb: int | None) -> None:
	with server.connect() as conn, conn.cursor() as cur:
		if table_cache:
			cur.execute(f"SET GLOBAL table_open_cache = {int(table_cache)}")
			cur.execute(f"SET GLOBAL table_definition_cache = {int(table_cache)}")
		if buffer_pool_mb:
			cur.execute(f"SET GLOBAL innodb_buffer_pool_size = {int(buffer_pool_mb) * 1024 * 1024}")
			# The resize runs in the background: wait for it.
			for _ in range(600):
				cur.execute("SELECT @@innodb_buffer_pool_size")
				if cur.fetchone()[0] >= int(buffer_pool_mb) * 1024 * 1024:
					cur.execute("SHOW GLOBAL STATUS LIKE 'Innodb_buffer_pool_resize_status'")
					row = cur.fetchone()
					if not row or not row[1] or "complete" in row[1].lower() or "completed" in row[1].lower():
						break
				time.sleep(0.1)


def server_settings(server: MariaDBServer) -> dict:
	with server.connect() as conn, conn.cursor() as cur:
		cur.execute(f"SELECT {', '.join('@@' + name for name in SERVER_SETTINGS)}")
		return dict(zip(SERVER_SETTINGS, (int(v) for v in cur.fetchone())))


# -- main ---------------------------------------------------------------------------------


def main() -> None:
	parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
	parser.add_argument("--sites", type=int, default=1000)
	parser.add_argument("--schedules", type=int, default=20, help="schedules per site")
	parser.add_argument("--idle-seconds", type=float, default=60)
	parser.add_argument(
		"--settle", type=float, default=10, help="seconds between the cold start and the idle measurement"
	)
	parser.add_argument("--passes", type=int, default=3, help="timed full reconciles")
	parser.add_argument(
		"--profile",
		action="store_true",
		help=(
			"one more full reconcile under cProfile, printed (the main thread only: py-spy --threads sees the readers)"
		),
	)
	parser.add_argument(
		"--table-cache",
		type=int,
		help="set the server's table_open_cache and table_definition_cache (default: MariaDB's, 2000 and 400)",
	)
	parser.add_argument(
		"--buffer-pool-mb", type=int, help="set the server's innodb_buffer_pool_size (default: tests/support's 32 MB)"
	)
	parser.add_argument(
		"--reader",
		action="store_true",
		help=(
			"grant the bench's reader login first (btu-scheduler setup db-reader --apply): many sites a query; "
			"default: each site on its own login"
		),
	)
	args = parser.parse_args()

	sites = [f"s{i:04d}.localhost" for i in range(args.sites)]
	log_dir = Path(tempfile.mkdtemp(prefix="btu-scale-logs-"))
	result: dict = {
		"args": vars(args),
		"code": code_version(),
		"load_at_start": now_load(),
		"uptime_at_start": os.popen("uptime").read().strip(),
	}
	mine: set = set()
	server = redis_server = bench = sampler = scheduler = None
	try:
		server = MariaDBServer(max_connections=MAX_CONNECTIONS).start()
		tune(server, args.table_cache, args.buffer_pool_mb)
		result["server"] = server_settings(server)
		redis_server = common.start_redis()
		r = redis_server.client()
		progress(
			f"MariaDB (max_connections {MAX_CONNECTIONS}) on port {server.port}, Redis at {redis_server.url}; "
			f"load {now_load()}"
		)
		t = time.monotonic()
		bench = ScaleBench(server, sites)
		bench.create(redis_server.url)
		result["create_sites_s"] = time.monotonic() - t
		hour = (datetime.now(timezone.utc).hour + 12) % 24
		result["fill_s"] = bench.fill(args.schedules, f"0 {hour} * * *")
		if args.reader:
			result["reader"] = grant_reader(bench)
		errors0 = server.status("Connection_errors_max_connections")

		sampler = ProcessList(server)
		sampler.start()
		progress("cold start")
		log = (log_dir / "scheduler-default.log").open("w")
		scheduler, result["cold"] = cold_start(
			bench,
			r,
			redis_server.url,
			sampler,
			mine,
			args.schedules,
			log,
			timeout=max(120.0, 0.3 * args.sites, 0.0005 * args.sites * args.schedules),
		)
		progress(f"cold start: {result['cold']['cold_start_s']} s; idle CPU over {args.idle_seconds:g} s")
		result["idle"] = idle_cpu(scheduler, redis_server.process.pid, args.idle_seconds, args.settle)
		progress(f"idle: {result['idle']['scheduler_percent']:.3f} % of a core; fires")
		t_fire = time.monotonic()
		result["fires"] = fires(bench, r)
		result["fires"]["server_peak"] = sampler.peak(mine, t_fire)
		started_wall = time.time()
		result["pools_default"] = wait_heartbeat(r, started_wall)
		result["server_peak_default"] = sampler.peak(mine, result["cold"]["t0"])
		common.stop(scheduler)
		log.close()
		scheduler = None

		progress("full reconcile in this process")
		sampler.paused.set()
		result["full"] = full_reconcile(bench, r, server, args.passes, args.profile)
		sampler.paused.clear()
		if result["full"]["profile"]:
			print(result["full"]["profile"], file=sys.stderr)

		progress("edit latency")
		log = (log_dir / "scheduler-refresh-1s.log").open("w")
		scheduler, result["edit"] = edit_latency(bench, r, redis_server.url, sampler, mine, log, EDIT_SAMPLES)
		result["pools_edit"] = wait_heartbeat(r, time.time())
		common.stop(scheduler)
		log.close()
		scheduler = None
		result["connection_errors_max_connections"] = server.status("Connection_errors_max_connections") - errors0
		result["server_peak_all"] = sampler.peak(mine)
		result["samples"] = sampler.count()
	finally:
		if scheduler is not None:
			common.stop(scheduler)
		if sampler is not None:
			sampler.stop()
		if bench is not None:
			bench.close()
		if redis_server is not None:
			redis_server.close()
		if server is not None:
			server.close()
	result["load_at_end"] = now_load()
	result["uptime_at_end"] = os.popen("uptime").read().strip()

	cold, idle, fire, full, edit = result["cold"], result["idle"], result["fires"], result["full"], result["edit"]
	pool_peak = max((p["peak"] for p in result["pools_default"] + result["pools_edit"]), default=None)
	pool_limit = max((p["limit"] for p in result["pools_default"] + result["pools_edit"]), default=None)
	waits = sum(p["waits"] for p in result["pools_default"] + result["pools_edit"])
	n, m = args.sites, args.schedules
	rows = [
		[
			f"{n:,} sites x {m} schedules, max_connections {MAX_CONNECTIONS}: sites in the state / sites that fire",
			BEFORE["fire"],
			f"{cold['sites_complete']:,} / {fire['sites_fired']:,} of {n:,}",
			f"{n:,}",
		],
		[
			f"{EXTRA_CLIENTS} more clients connect as the sites' users while it loads",
			BEFORE["clients"],
			f"{cold['extra_clients_ok']} of {EXTRA_CLIENTS}; "
			f"Connection_errors_max_connections {result['connection_errors_max_connections']}",
			"all, 0 errors",
		],
		[
			"connections the scheduler holds (server's processlist peak; pool's peak)",
			BEFORE["held"],
			f"{result['server_peak_all']}; {pool_peak} (limit {pool_limit}, {waits} waits)",
			f"<= the setting ({pool_limit}), <= 8",
		],
		[
			"cold start until every schedule is in Redis",
			BEFORE["cold"],
			f"{cold['cold_start_s']:.1f} s" if cold["cold_start_s"] else "not within the timeout",
			"<= 10 s",
		],
		[
			f"full reconcile with nothing changed (median / max of {args.passes})",
			BEFORE["full"],
			f"{full['median_s']:.2f} s / {full['max_s']:.2f} s",
			"<= 1 s",
		],
		[
			"Redis memory per schedule (used_memory loaded less before); the scheduler's RSS loaded",
			"1.66 KB",
			f"{cold['redis_bytes_per_schedule']:.0f} bytes "
			f"({cold['redis_bytes_per_schedule'] * 1e6 / 2**30:.2f} GB for 1M); {cold['rss_mb_loaded']:.0f} MB",
			"1M: Redis <= 1 GB, RSS <= 500 MB",
		],
		[
			f"idle CPU, nothing due ({args.idle_seconds:g} s; "
			"default settings: each site read once in 0.3 s times the sites)",
			BEFORE["cpu"],
			f"{idle['scheduler_percent']:.2f} %",
			"<= 0.2 %",
		],
		[
			f"an edit takes effect, --full-refresh-interval-secs 1 (p50 / p99 / max of {edit['landed']})",
			BEFORE["edit"],
			f"{edit['lag_p50_ms']:.0f} / {edit['lag_p99_ms']:.0f} / {edit['lag_max_ms']:.0f} ms"
			if edit["landed"]
			else "none landed",
			"<= 100 ms",
		],
	]
	text = common.table(["measure", "before (issue 29)", "measured", "target"], rows)
	cost = common.table(
		["per full reconcile pass", "measured"],
		[
			[
				"DB statements per site (Questions: the SELECT, and a new connection's SET NAMES and SET AUTOCOMMIT)",
				round(full["db_queries_per_site"], 2),
			],
			["DB SELECTs per site (Com_select)", round(full["db_selects_per_site"], 2)],
			["CPU seconds of the reconciling process", round(full["cpu_s_per_pass"], 2)],
			["CPU seconds of mariadbd (median)", round(full["db_server_cpu_s_per_pass"], 2)],
			["DB connections opened", int(full["db_connections_per_pass"])],
			["tables the server opened (not in its table cache)", int(full["db_tables_opened_per_pass"])],
			["InnoDB buffer pool reads (pages not in memory)", int(full["db_buffer_pool_reads_per_pass"])],
			["Redis round trips", int(full["redis_round_trips_per_pass"])],
			["Redis commands", int(full["redis_commands_per_pass"])],
			[
				"the scheduler's own reconciles during the edits (count x mean)",
				", ".join(
					f"{kind} {int(v['count'])} x {v['mean_s']:.2f} s"
					for kind, v in edit["reconciles_meanwhile"].items()
				)
				or "-",
			],
		],
	)
	print(text)
	print()
	print(cost)
	print(f"\nload average (1/5/15 min): {result['load_at_start']} at the start, {result['load_at_end']} at the end")
	result.pop("samples", None)
	cold.pop("t0", None)
	name = ("scale" if args.table_cache is None and args.buffer_pool_mb is None else "scale_server_tuned") + (
		"_reader" if args.reader else ""
	)
	settings = ", ".join(f"{k} {v:,}" for k, v in result["server"].items())
	print(f"MariaDB: {settings}")
	path = common.write_result(name, {**result, "table": text, "cost_table": cost})
	print(f"wrote {path} (scheduler logs in {log_dir})")


if __name__ == "__main__":
	main()
