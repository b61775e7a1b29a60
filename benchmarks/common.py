"""What every benchmark shares: private services, dev benches with many schedules,
a BTU scheduler process, /proc readings, percentiles, tables, JSON and plots.

Run each with `scripts/benchmark NAME [ARGS]` (it makes .venv-bench with Frappe
v15's pins and benchmarks/requirements.txt), or from the repository root with
any Python that has both installed: `python benchmarks/NAME.py`.
"""

from __future__ import annotations

import json
import os
import platform
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from datetime import datetime, timezone
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
if str(REPO) not in sys.path:
	sys.path.insert(0, str(REPO))

import redis  # noqa: E402

from btu.shared import protocol  # noqa: E402
from devbench.bench import create_dev_bench, drop_dev_bench  # noqa: E402
from devbench.data import SiteData  # noqa: E402
from tests.support.keys import KEYS
from tests.support.redis_server import RedisServer  # noqa: E402,F401 (chaos.py uses common.RedisServer)

RESULTS = REPO / "benchmarks" / "results"
SITE = "bench1.localhost"
CLK_TCK = os.sysconf("SC_CLK_TCK")
JOB_FUNCTION = "benchmarks.jobs.record"


# -- machine ---------------------------------------------------------------------


def connect_site(bench: Path, site: str):
	"""frappe, initialised and connected to `site` of the bench `bench` as Administrator (in-bench benchmarks)."""
	import frappe

	os.chdir(bench / "sites")
	frappe.init(site=site, sites_path=".")
	frappe.connect()
	frappe.set_user("Administrator")
	return frappe


def add_systems_argument(parser, systems) -> None:
	"""`--systems a,b`: which of a benchmark's systems to run (default all)."""
	parser.add_argument("--systems", default=",".join(systems), help=f"comma-separated, from {', '.join(systems)}")


# "on": BTU serves /metrics and a scraper reads it this often, 15 times Prometheus's default interval.
SCRAPE_SECONDS = 1.0


def add_metrics_argument(parser) -> None:
	"""`--metrics off|on|both`: BTU with its /metrics endpoint off, on and scraped every SCRAPE_SECONDS, or both side
	by side."""
	parser.add_argument(
		"--metrics",
		choices=("off", "on", "both"),
		default="off",
		help=f"run BTU with its metrics endpoint off, on (scraped every {SCRAPE_SECONDS:g} s), or both, side by side",
	)


def metrics_modes(choice: str) -> list[bool]:
	return {"off": [False], "on": [True], "both": [False, True]}[choice]


def free_port() -> int:
	from tests.support.ports import claim_port

	return claim_port()


class Scraper:
	"""Reads a scheduler's /metrics every `every` seconds on a thread, as Prometheus would; `scrapes` counts answers."""

	def __init__(self, port: int, every: float = SCRAPE_SECONDS):
		self.url = f"http://127.0.0.1:{port}/metrics"
		self.every = every
		self.scrapes = self.failures = 0
		self.stopped = threading.Event()
		self.thread = threading.Thread(target=self.run, daemon=True)

	def start(self) -> Scraper:
		self.thread.start()
		return self

	def run(self) -> None:
		while not self.stopped.wait(self.every):
			try:
				with urllib.request.urlopen(self.url, timeout=5) as response:
					response.read()
				self.scrapes += 1
			except OSError:
				self.failures += 1  # the scheduler is starting or stopping

	def stop(self) -> None:
		self.stopped.set()
		self.thread.join()


def start_btu(
	bench: DevBench, redis_url: str | None, executor: str, metrics: bool, log=None
) -> tuple[subprocess.Popen, Scraper | None]:
	"""BTU's scheduler, with its metrics endpoint served and scraped when `metrics`."""
	port = free_port() if metrics else None
	scheduler = start_scheduler(bench, redis_url, executor, ["--metrics-port", str(port)] if port else None, log=log)
	return scheduler, Scraper(port).start() if port else None


def metrics_setting(metrics: bool) -> str:
	return f"metrics on, scraped every {SCRAPE_SECONDS:g} s" if metrics else "metrics off"


def machine() -> dict:
	cpu = next(
		(
			line.split(":", 1)[1].strip()
			for line in Path("/proc/cpuinfo").read_text().splitlines()
			if line.startswith("model name")
		),
		"?",
	)
	mem_kb = int(
		next(line.split()[1] for line in Path("/proc/meminfo").read_text().splitlines() if line.startswith("MemTotal"))
	)

	def version(cmd: list[str]) -> str:
		try:
			return subprocess.run(cmd, capture_output=True, text=True, timeout=10).stdout.strip()
		except OSError:
			return "?"

	import rq

	return {
		"nproc": os.cpu_count(),
		"cpu": cpu,
		"memory_gib": round(mem_kb / 1024 / 1024, 1),
		"redis": version(["redis-server", "--version"]),
		"mariadb": version(["mysql", "--version"]),
		"python": platform.python_version(),
		"rq": rq.__version__,
		"redis_py": redis.__version__,
		"load_average_1_5_15": os.getloadavg(),
	}


# -- services and benches ------------------------------------------------------------


def start_redis(persistent: bool = False) -> RedisServer:
	return RedisServer(persistent=persistent).start()


class DevBench:
	"""A dev bench with one site whose Redis is `redis_url`; dropped by `close()`."""

	def __init__(self, redis_url: str, **kwargs):
		self.path = Path(tempfile.mkdtemp(prefix="btu-benchmark-"))
		# The package `benchmarks` is an app of the bench: its hooks.py declares JOB_FUNCTION runnable.
		self.bench = create_dev_bench(self.path, (SITE,), redis_url=redis_url, apps={"benchmarks": REPO}, **kwargs)
		self.data = SiteData(self.bench, SITE)
		self.task = self.data.insert_task(
			desc_short="benchmark task", function_string=JOB_FUNCTION, queue_name="default", max_task_duration=60
		)

	@property
	def queue(self) -> str:
		"""The RQ queue key BTU fires into."""
		return f"rq:queue:{self.bench.queue_name('default')}"

	def insert_schedules(self, rows: list[dict]) -> list[str]:
		"""Insert many BTU Task Schedule rows of the bench's task by executemany (`SiteData.insert_many`)."""
		with self.data.conn.cursor() as cur:
			cur.execute("SELECT COUNT(*) FROM `tabBTU Task Schedule`")
			start = cur.fetchone()[0]
		named = [
			{**given, "name": f"TS-{offset:06d}", "task": self.task}
			for offset, given in enumerate(rows, start=start + 1)
		]
		self.data.insert_many("BTU Task Schedule", named)
		return [row["name"] for row in named]

	def close(self) -> None:
		self.data.close()
		drop_dev_bench(self.path)


def scheduler_command(
	bench: DevBench, redis_url: str | None, executor: str = "rq", extra: list[str] | None = None
) -> list[str]:
	"""`redis_url` None: the bench's own (its redis_queue, or its Sentinel settings)."""
	return [
		sys.executable,
		"-m",
		"btu.scheduler_daemon",
		"run",
		"--bench",
		str(bench.path),
		*(["--redis-url", redis_url] if redis_url else []),
		"--executor",
		executor,
		"--log-level",
		"WARNING",
		*(extra or []),
	]


def start_scheduler(
	bench: DevBench, redis_url: str | None, executor: str = "rq", extra: list[str] | None = None, log=None
) -> subprocess.Popen:
	return subprocess.Popen(
		scheduler_command(bench, redis_url, executor, extra),
		cwd=REPO,
		stdout=log or subprocess.DEVNULL,
		stderr=subprocess.STDOUT if log else subprocess.DEVNULL,
	)


def wait_for_schedules(r: redis.Redis, count: int, timeout: float = 600) -> float:
	"""Seconds until the site's state holds `count` schedules (the reconcile has loaded them)."""
	started = time.monotonic()
	key = KEYS.site_schedules_key(SITE)
	while r.scard(key) < count:
		if time.monotonic() - started > timeout:
			raise RuntimeError(f"only {r.scard(key)} of {count} schedules loaded after {timeout} s")
		time.sleep(0.1)
	return time.monotonic() - started


def stop(process: subprocess.Popen, timeout: float = 10) -> None:
	if process.poll() is None:
		process.terminate()
		try:
			process.wait(timeout)
		except subprocess.TimeoutExpired:
			process.kill()
			process.wait()


# -- /proc ---------------------------------------------------------------------------------


def cpu_seconds(pid: int) -> float:
	"""utime + stime of a process, in seconds (fields 14 and 15 of /proc/<pid>/stat)."""
	text = Path(f"/proc/{pid}/stat").read_text()
	fields = text[text.rindex(")") + 2 :].split()
	return (int(fields[11]) + int(fields[12])) / CLK_TCK


def on_cpu_seconds(pid: int) -> float:
	"""The time a process's live threads have spent on a CPU, to the nanosecond (/proc/<pid>/task/*/schedstat): for a
	process that costs a few clock ticks a minute, where cpu_seconds reads 0.1 s steps as 0.17 % of a minute."""
	total = 0
	for task in Path(f"/proc/{pid}/task").iterdir():
		try:
			total += int((task / "schedstat").read_text().split()[0])
		except (OSError, ValueError, IndexError):
			pass  # a thread that ended meanwhile
	return total / 1e9


def rss_mb(pid: int) -> float:
	for line in Path(f"/proc/{pid}/status").read_text().splitlines():
		if line.startswith("VmRSS:"):
			return int(line.split()[1]) / 1024
	return 0.0


# -- numbers and output ------------------------------------------------------------------


def percentile(values: list[float], p: float) -> float | None:
	if not values:
		return None
	ordered = sorted(values)
	k = (len(ordered) - 1) * p / 100
	lo = int(k)
	hi = min(lo + 1, len(ordered) - 1)
	return ordered[lo] + (ordered[hi] - ordered[lo]) * (k - lo)


def lag_summary(lags_ms: list[float]) -> dict:
	return {
		"count": len(lags_ms),
		"p50_ms": percentile(lags_ms, 50),
		"p90_ms": percentile(lags_ms, 90),
		"p99_ms": percentile(lags_ms, 99),
		"max_ms": max(lags_ms) if lags_ms else None,
	}


def fmt(value) -> str:
	if value is None:
		return "-"
	if isinstance(value, float):
		if abs(value) < 1:
			return f"{value:.3f}"
		return f"{value:,.1f}" if abs(value) < 1e5 else f"{value:,.0f}"
	if isinstance(value, int):
		return f"{value:,}"
	return str(value)


def table(headers: list[str], rows: list[list]) -> str:
	"""A Markdown table, printed as it goes into the docs."""
	cells = [[fmt(v) for v in row] for row in rows]
	widths = [max(len(h), *(len(r[i]) for r in cells)) if cells else len(h) for i, h in enumerate(headers)]
	lines = ["| " + " | ".join(h.ljust(w) for h, w in zip(headers, widths)) + " |"]
	lines.append("|" + "|".join("-" * (w + 2) for w in widths) + "|")
	for row in cells:
		lines.append("| " + " | ".join(c.ljust(w) for c, w in zip(row, widths)) + " |")
	return "\n".join(lines)


def merge_previous(name: str, rows: list[dict], key: tuple[str, ...]) -> list[dict]:
	"""This run's rows, then the previous result's rows for what this run left out (each keeps the `ran_at` it was
	measured at).

	So `--systems btu` re-measures BTU and keeps the peers' figures side by side.
	"""
	path = RESULTS / f"{name}.json"
	if not path.exists():
		return rows
	previous = json.loads(path.read_text())
	ran = {tuple(row.get(k) for k in key) for row in rows}
	kept = [
		{**row, "ran_at": row.get("ran_at", previous.get("ran_at"))}
		for row in previous.get("rows", [])
		if tuple(row.get(k) for k in key) not in ran
	]
	return rows + kept


def write_result(name: str, data: dict) -> Path:
	RESULTS.mkdir(parents=True, exist_ok=True)
	path = RESULTS / f"{name}.json"
	data = {
		"benchmark": name,
		"ran_at": datetime.now(timezone.utc).isoformat(timespec="seconds"),
		"machine": machine(),
		**data,
	}
	path.write_text(json.dumps(data, indent=1, default=str) + "\n")
	return path


def pyplot():
	"""matplotlib's pyplot without a display, or None when matplotlib is missing (the JSON and table still come)."""
	try:
		import matplotlib
	except ImportError:
		print("matplotlib is not installed (pip install -r benchmarks/requirements.txt): no plot", file=sys.stderr)
		return None
	matplotlib.use("Agg")
	import matplotlib.pyplot as plt

	return plt
