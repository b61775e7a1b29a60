r"""What Frappe v15's own scheduler tick costs, per site and for a bench of N sites (issue 29), inside a real bench.

Frappe's scheduler process (`bench schedule`, `frappe.utils.scheduler.start_scheduler`) sleeps
`scheduler_tick_interval` (60 s by default) and then runs `enqueue_events_for_all_sites`: for every site of the
bench, one after the other, `enqueue_events_for_site` does frappe.init, frappe.connect (a new MariaDB connection,
as the site's own user), `is_scheduler_inactive` (System Settings), `enqueue_events` (every Scheduled Job Type that
is not stopped, each one's `enqueue`, which pushes the due ones on RQ) and frappe.destroy (the connection closed).

This runs Frappe's own functions in this process, as its scheduler process would, and counts around each site's
`enqueue_events_for_site`:

- wall time and CPU time of this process (`time.process_time`: user + system, the scheduler is one thread);
- MariaDB: connections opened and statements sent (PyMySQL's COM_QUERY, SELECTs apart), counted in the client; one
  audit pass reads the session's own `Questions` / `Com_select` from the server before each site's connection closes;
- Redis: connections opened and commands sent, per server (13000 the cache, 11000 the queue), counted in redis-py;
- jobs pushed on RQ. Between ticks (not timed) the jobs a tick pushed are taken off RQ and their Scheduled Job
  Types' `last_execution` set to now, as a worker running them would, so each tick finds due what a bench with
  workers would find due (and nothing is left on the bench's queues).

Sites: test.localhost as it is (its System Settings say the scheduler is disabled, so its tick stops after one
query), and `--make-sites K` sites tick1..K.localhost made with `bench new-site` (only Frappe installed), their
scheduler enabled for the run; they are dropped at the end unless `--keep-sites`. The scaling pass runs Frappe's
`enqueue_events_for_all_sites` itself over 1, 2, 4, ... of those sites (its `get_sites` narrowed), `--ticks` times
each after one warm-up tick, to show how a tick grows with the number of sites.

    cd /root/frappe-bench/sites && ../env/bin/python /work/main/benchmarks/frappe_tick.py \
        --bench /root/frappe-bench --make-sites 8

Prints tables, writes benchmarks/results/frappe_tick.json. Nothing of Frappe's configuration is changed: a site's
`enable_scheduler` is put back as it was, and the sites it made are dropped.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import table, write_result  # noqa: E402

REAL_SITE = "test.localhost"
TICK_SECONDS = 60  # Frappe v15's default scheduler_tick_interval
# ScheduledJobType.get_next_execution's map (v15), "All" apart (every scheduler_interval, 240 s by default).
CRON_MAP = {
	"Yearly": "0 0 1 1 *",
	"Annual": "0 0 1 1 *",
	"Monthly": "0 0 1 * *",
	"Weekly": "0 0 * * 0",
	"Daily": "0 0 * * *",
	"Hourly": "0 * * * *",
}


# -- counting ----------------------------------------------------------------------


class Count:
	"""Process-wide counters the patches below add to; a site's figures are the difference around its call."""

	values: Counter = Counter()

	@classmethod
	def snapshot(cls) -> Counter:
		return Counter(cls.values)


def install_counters() -> None:
	import pymysql.connections
	import redis.connection
	from pymysql.constants import COMMAND

	conn = pymysql.connections.Connection
	real_connect, real_execute = conn.connect, conn._execute_command

	def connect(self, *args, **kwargs):
		Count.values["db_connects"] += 1
		return real_connect(self, *args, **kwargs)

	def execute(self, command, sql):
		if command == COMMAND.COM_QUERY:
			Count.values["db_statements"] += 1
			text = sql if isinstance(sql, str) else sql.decode(errors="replace")
			if text.lstrip().lower().startswith("select"):
				Count.values["db_selects"] += 1
		else:
			Count.values["db_other_commands"] += 1
		return real_execute(self, command, sql)

	conn.connect, conn._execute_command = connect, execute

	abstract = redis.connection.AbstractConnection
	real_rconnect, real_send, real_packs = abstract.connect, abstract.send_command, abstract.pack_commands

	def rconnect(self):
		if self._sock is None:
			Count.values[f"redis_connects_{getattr(self, 'port', '?')}"] += 1
		return real_rconnect(self)

	def send_command(self, *args, **kwargs):  # one command (a pipeline packs its commands with pack_commands)
		Count.values[f"redis_commands_{getattr(self, 'port', '?')}"] += 1
		return real_send(self, *args, **kwargs)

	def pack_commands(self, commands):
		commands = list(commands)
		Count.values[f"redis_commands_{getattr(self, 'port', '?')}"] += len(commands)
		return real_packs(self, commands)

	abstract.connect, abstract.send_command, abstract.pack_commands = rconnect, send_command, pack_commands


class Pushed:
	"""The jobs Frappe's tick pushed on RQ, to be run away (taken off, last_execution set) between ticks."""

	jobs: list = []  # (site, method, rq job)


def install_enqueue_spy() -> None:
	import frappe
	import frappe.core.doctype.scheduled_job_type.scheduled_job_type as sjt

	real_enqueue = sjt.enqueue

	def enqueue(*args, **kwargs):
		job = real_enqueue(*args, **kwargs)
		Count.values["jobs_pushed"] += 1
		Pushed.jobs.append((frappe.local.site, kwargs.get("job_type"), job))
		return job

	sjt.enqueue = enqueue

	real_logger = frappe.logger

	class Spy:
		def __init__(self, logger):
			self.logger = logger

		def __getattr__(self, name):
			return getattr(self.logger, name)

		def error(self, message, *args, **kwargs):
			Count.values["skipped_in_queue" if str(message).startswith("Skipped queueing") else "errors"] += 1
			if not str(message).startswith("Skipped queueing"):
				print(f"  scheduler error: {message}", file=sys.stderr)
			return self.logger.error(message, *args, **kwargs)

	def logger(module=None, *args, **kwargs):
		found = real_logger(module, *args, **kwargs)
		return Spy(found) if module == "scheduler" else found

	frappe.logger = logger


def run_jobs_away() -> int:
	"""What a worker would leave: the pushed jobs gone from RQ and their job types' last_execution now."""
	import frappe

	by_site: dict[str, list[str]] = {}
	for site, method, job in Pushed.jobs:
		if job is not None:
			job.delete()
		by_site.setdefault(site, []).append(method)
	for site, methods in by_site.items():
		frappe.init(site=site)
		frappe.connect()
		try:
			for method in methods:
				frappe.db.sql(
					"update `tabScheduled Job Type` set last_execution = %s where method = %s",
					(frappe.utils.now_datetime(), method),
				)
			frappe.db.commit()
		finally:
			frappe.destroy()
	count = len(Pushed.jobs)
	Pushed.jobs = []
	return count


# -- measuring ---------------------------------------------------------------------

FIELDS = [
	"wall_ms",
	"cpu_ms",
	"db_connects",
	"db_statements",
	"db_selects",
	"db_other_commands",
	"redis_commands",
	"redis_connects",
	"jobs_pushed",
	"skipped_in_queue",
	"errors",
]


def diff(before: Counter, after: Counter) -> dict:
	d = {k: after[k] - before[k] for k in set(after) | set(before)}
	out = {k: d.get(k, 0) for k in FIELDS if not k.endswith("_ms") and not k.startswith("redis_")}
	out["redis_commands"] = sum(v for k, v in d.items() if k.startswith("redis_commands_"))
	out["redis_connects"] = sum(v for k, v in d.items() if k.startswith("redis_connects_"))
	out["redis_commands_by_port"] = {
		k.rsplit("_", 1)[1]: v for k, v in d.items() if k.startswith("redis_commands_") and v
	}
	return out


class PerSite:
	"""Wraps frappe.utils.scheduler.enqueue_events_for_site: each call's figures, by site."""

	def __init__(self):
		import frappe.utils.scheduler as scheduler

		self.scheduler = scheduler
		self.real = scheduler.enqueue_events_for_site
		self.calls: list[dict] = []
		scheduler.enqueue_events_for_site = self.measure

	def measure(self, site: str) -> None:
		before = Count.snapshot()
		cpu, wall = time.process_time(), time.perf_counter()
		try:
			self.real(site=site)
		finally:
			wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
			self.calls.append(
				{"site": site, "wall_ms": wall * 1000, "cpu_ms": cpu * 1000, **diff(before, Count.snapshot())}
			)


def tick(per_site: PerSite, sites: list[str]) -> dict:
	"""One tick of Frappe's scheduler over `sites` (its own enqueue_events_for_all_sites, get_sites narrowed)."""
	scheduler = per_site.scheduler
	scheduler.get_sites = lambda: list(sites)
	first = len(per_site.calls)
	before = Count.snapshot()
	cpu, wall = time.process_time(), time.perf_counter()
	scheduler.enqueue_events_for_all_sites()
	wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
	result = {
		"sites": len(sites),
		"wall_ms": wall * 1000,
		"cpu_ms": cpu * 1000,
		**diff(before, Count.snapshot()),
		"per_site": per_site.calls[first:],
	}
	result["jobs_run_away"] = run_jobs_away()
	return result


def audit(sites: list[str]) -> list[dict]:
	"""One pass in which each site's connection reports the server's own count of its statements before it closes."""
	import frappe
	import frappe.utils.scheduler as scheduler

	real_destroy = frappe.destroy
	found: list[dict] = []

	def destroy():
		db = getattr(frappe.local, "db", None)
		conn = getattr(db, "_conn", None) if db else None
		row = {"site": frappe.local.site, "connected": conn is not None}
		if conn is not None:
			with conn.cursor() as cursor:
				cursor.execute("SHOW SESSION STATUS WHERE Variable_name IN ('Questions', 'Com_select')")
				status = {name: int(value) for name, value in cursor.fetchall()}
			# This SHOW counts in Questions itself; Com_select is untouched by it.
			row.update({"server_questions": status["Questions"] - 1, "server_com_select": status["Com_select"]})
		found.append(row)
		real_destroy()

	frappe.destroy = destroy
	try:
		for site in sites:
			before = Count.snapshot()
			scheduler.enqueue_events_for_site(site=site)
			client = diff(before, Count.snapshot())
			found[-1]["client_statements"] = client["db_statements"] - (1 if found[-1]["connected"] else 0)
			found[-1]["client_selects"] = client["db_selects"]
	finally:
		frappe.destroy = real_destroy
		run_jobs_away()
	return found


def median(rows: list[dict], key: str) -> float:
	return statistics.median(r[key] for r in rows) if rows else 0.0


def summary(calls: list[dict]) -> dict:
	keys = [k for k in FIELDS if k in calls[0]]
	out = {f"median_{k}": median(calls, k) for k in keys}
	out.update({f"max_{k}": max(c[k] for c in calls) for k in ("wall_ms", "cpu_ms")})
	out.update({f"mean_{k}": statistics.fmean(c[k] for c in calls) for k in keys})
	out["samples"] = len(calls)
	return out


# -- sites -------------------------------------------------------------------------


def bench_cli(args: list[str], bench: Path) -> None:
	# MariaDB's root has no password here: Frappe prompts for it, an empty line answers (BUILD_NOTES.md).
	subprocess.run(["bench", *args], cwd=bench, input="\n", text=True, check=True, capture_output=True)


def make_sites(bench: Path, count: int) -> tuple[list[str], list[str]]:
	names = [f"tick{i}.localhost" for i in range(1, count + 1)]
	made = []
	for name in names:
		if (bench / "sites" / name / "site_config.json").exists():
			continue
		started = time.perf_counter()
		bench_cli(["new-site", name, "--admin-password", "admin", "--db-root-username", "root"], bench)
		made.append(name)
		print(f"made {name} in {time.perf_counter() - started:.0f} s", flush=True)
	return names, made


def drop_sites(bench: Path, names: list[str]) -> None:
	"""Each site's database, user and folder gone (the folder archived to a temporary directory, then removed)."""
	archive = Path(tempfile.mkdtemp(prefix="frappe_tick_archived_"))
	try:
		import frappe

		cache = frappe.cache  # the bench's redis_cache, set up by the ticks
		for name in names:
			config = bench / "sites" / name / "site_config.json"
			if config.exists():
				db_name = json.loads(config.read_text())["db_name"]
				bench_cli(
					[
						"drop-site",
						name,
						"--force",
						"--no-backup",
						"--db-root-username",
						"root",
						"--archived-sites-path",
						str(archive),
					],
					bench,
				)
				# drop-site leaves the site's keys in the bench's cache (named by its database): take them too.
				keys = list(cache.scan_iter(match=f"{db_name}|*")) if cache else []
				if keys:
					cache.delete(*keys)
				print(f"dropped {name} ({len(keys)} cache keys)", flush=True)
	finally:
		shutil.rmtree(archive, ignore_errors=True)


def set_scheduler(site: str, value: int | None) -> int:
	"""The site's System Settings enable_scheduler set to `value` (None: left); returns what it was."""
	import frappe

	frappe.init(site=site)
	frappe.connect()
	try:
		was = frappe.utils.cint(frappe.db.get_single_value("System Settings", "enable_scheduler"))
		if value is not None and value != was:
			frappe.db.set_single_value("System Settings", "enable_scheduler", value)
			frappe.db.commit()
		return was
	finally:
		frappe.destroy()


def job_types(site: str) -> dict:
	"""The site's Scheduled Job Types that are not stopped, and how many of them fall due in an average tick (a
	bench whose workers keep up: each due once a period), from their frequency or cron over one day."""
	from datetime import datetime, timedelta

	import frappe
	from croniter import croniter

	frappe.init(site=site)
	frappe.connect()
	try:
		rows = frappe.get_all("Scheduled Job Type", filters={"stopped": 0}, fields=["frequency", "cron_format"])
		start = datetime(2026, 1, 5)  # a Monday
		per_day = 0.0
		for row in rows:
			if row.frequency == "All":
				per_day += 86400 / (frappe.utils.cint(frappe.get_conf().scheduler_interval) or 240)
				continue
			cron = row.cron_format if row.frequency == "Cron" else CRON_MAP[row.frequency.replace(" Long", "")]
			it, fires = croniter(cron, start), 0
			window = 28 if "Monthly" in row.frequency or "Weekly" in row.frequency else 1
			while it.get_next(datetime) < start + timedelta(days=window):
				fires += 1
			per_day += fires / window
		return {
			"not_stopped": len(rows),
			"by_frequency": dict(Counter(r.frequency for r in rows)),
			"due_per_tick": per_day / (86400 / TICK_SECONDS),
		}
	finally:
		frappe.destroy()


def make_all_due(sites: list[str]) -> None:
	"""Every Scheduled Job Type of these (made) sites last ran 32 days ago, so the next tick pushes them all."""
	import frappe

	for site in sites:
		frappe.init(site=site)
		frappe.connect()
		try:
			frappe.db.sql(
				"update `tabScheduled Job Type` set last_execution = now() - interval 32 day where stopped = 0"
			)
			frappe.db.commit()
		finally:
			frappe.destroy()


# -- main --------------------------------------------------------------------------


def main() -> None:
	parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
	parser.add_argument("--bench", type=Path, default=Path("/root/frappe-bench"))
	parser.add_argument(
		"--make-sites", type=int, default=8, help="sites tick1..K.localhost to make (or reuse) with `bench new-site`"
	)
	parser.add_argument(
		"--keep-sites", action="store_true", help="leave the tick sites (default: drop them at the end)"
	)
	parser.add_argument("--ticks", type=int, default=5, help="timed ticks per measurement, after one warm-up tick")
	parser.add_argument(
		"--pause", type=float, default=1.0, help="seconds between ticks, so the machine is not kept busy"
	)
	args = parser.parse_args()

	bench = args.bench.resolve()
	os.chdir(bench / "sites")
	sys.path.insert(0, str(bench / "sites"))
	import frappe  # noqa: F401 (the bench's)

	install_counters()
	install_enqueue_spy()
	per_site = PerSite()

	names, made = make_sites(bench, args.make_sites) if args.make_sites else ([], [])
	restore: dict[str, int] = {}
	result: dict = {"tick_interval_s": TICK_SECONDS, "ticks": args.ticks, "sites_made": names}
	try:
		restore[REAL_SITE] = set_scheduler(REAL_SITE, None)
		for name in names:
			restore[name] = set_scheduler(name, 1)
		result["scheduler_enabled_before"] = dict(restore)
		result["job_types"] = {site: job_types(site) for site in [REAL_SITE, *names[:1]]}

		def ticks(sites: list[str]) -> dict:
			warm = tick(per_site, sites)  # imports, controllers, Redis pools, the activity cache
			time.sleep(args.pause)
			timed = []
			for _ in range(args.ticks):
				timed.append(tick(per_site, sites))
				time.sleep(args.pause)
			return {"warm_up": warm, "timed": timed}

		# 1. The one real site, as it is.
		print(f"{REAL_SITE}: {args.ticks} ticks", flush=True)
		real = ticks([REAL_SITE])
		result["real_site"] = {
			"site": REAL_SITE,
			"scheduler_enabled": restore[REAL_SITE],
			"warm_up": real["warm_up"]["per_site"][0],
			**summary([t["per_site"][0] for t in real["timed"]]),
			"ticks": real["timed"],
		}

		# 2. Scaling: Frappe's whole tick over 1, 2, 4, ... of the made sites (scheduler enabled).
		scaling = []
		sizes = sorted({n for n in (1, 2, 4, 8, 16, 32, len(names)) if 0 < n <= len(names)})
		for n in sizes:
			print(f"{n} site(s): {args.ticks} ticks", flush=True)
			runs = ticks(names[:n])
			timed = runs["timed"]
			calls = [c for t in timed for c in t["per_site"]]
			row = {
				"sites": n,
				"tick_wall_ms": median(timed, "wall_ms"),
				"tick_cpu_ms": median(timed, "cpu_ms"),
				"tick_wall_ms_max": max(t["wall_ms"] for t in timed),
				**{
					f"tick_{k}": median(timed, k)
					for k in (
						"db_connects",
						"db_statements",
						"db_selects",
						"redis_commands",
						"redis_connects",
						"jobs_pushed",
					)
				},
				"per_site": summary(calls),
				"warm_up_tick_wall_ms": runs["warm_up"]["wall_ms"],
				"ticks": timed,
			}
			scaling.append(row)
		result["scaling"] = scaling

		# 3. A tick that finds every job type due on every site (after a long stop, or once a month at midnight), to
		# price a push: the average tick's cost is the idle tick's plus due_per_tick pushes.
		due = []
		for _ in range(min(args.ticks, 2)):
			make_all_due(names)
			due.append(tick(per_site, names))
			time.sleep(args.pause)
		if due:
			calls = [c for t in due for c in t["per_site"]]
			result["all_due"] = {
				"sites": len(names),
				"tick_wall_ms": median(due, "wall_ms"),
				"tick_cpu_ms": median(due, "cpu_ms"),
				"per_site": summary(calls),
				"ticks": due,
			}

		# 4. The server's own count of each site's statements, once.
		result["audit"] = audit([REAL_SITE, *names[:2]])
	finally:
		if names and not args.keep_sites:
			drop_sites(bench, names)
		else:
			for site in names:
				if site in restore:
					set_scheduler(site, restore[site])

	if result.get("scaling") and result.get("all_due"):
		result["extrapolation"] = extrapolate(result)
	report(result)
	path = write_result("frappe_tick", result)
	print(f"\n(written to {path})")


def extrapolate(result: dict) -> dict:
	"""A site's average tick (the idle tick, plus its job types' average pushes at the measured cost of a push) times N,
	the idle tick's figures from the largest measured set of sites.
	Linear in N: Frappe's tick does the same for every site, one after the other."""
	idle, due = result["scaling"][-1], result["all_due"]["per_site"]
	idle_site = idle["per_site"]
	pushes = due["mean_jobs_pushed"] - idle_site["mean_jobs_pushed"]
	made = [s for s in result["job_types"] if s != REAL_SITE]
	due_per_tick = result["job_types"][made[0]]["due_per_tick"]
	# Times: medians (the machine is shared; a mean follows its other load); counts: means.
	stat = {"wall_ms": "median", "cpu_ms": "median", "redis_commands": "mean"}
	push = {k: (due[f"{m}_{k}"] - idle_site[f"{m}_{k}"]) / pushes for k, m in stat.items()}
	site = {
		k: idle_site[f"{m}_{k}"] + (due_per_tick - idle_site["mean_jobs_pushed"]) * push[k] for k, m in stat.items()
	}
	rows = []
	for n in (100, 1000):
		rows.append(
			{
				"sites": n,
				"tick_wall_s": site["wall_ms"] * n / 1000,
				"tick_cpu_s": site["cpu_ms"] * n / 1000,
				"cpu_percent_of_a_core": site["cpu_ms"] * n / 1000 / result["tick_interval_s"] * 100,
				"db_connects_per_min": idle_site["mean_db_connects"] * n,
				"db_statements_per_min": idle_site["mean_db_statements"] * n,
				"redis_commands_per_min": site["redis_commands"] * n,
			}
		)
	return {
		"measured_sites": idle["sites"],
		"due_per_tick": due_per_tick,
		"push_wall_ms": push["wall_ms"],
		"push_cpu_ms": push["cpu_ms"],
		"push_redis_commands": push["redis_commands"],
		"site_wall_ms": site["wall_ms"],
		"site_cpu_ms": site["cpu_ms"],
		"site_redis_commands": site["redis_commands"],
		"rows": rows,
	}


def report(result: dict) -> None:
	real = result["real_site"]
	enabled = result["scaling"][-1]["per_site"] if result["scaling"] else None
	headers = [
		"site",
		"scheduler",
		"wall ms",
		"CPU ms",
		"DB connects",
		"DB statements (SELECT)",
		"Redis commands",
		"Redis connects",
		"jobs pushed",
	]
	rows = [
		[
			real["site"],
			"disabled" if not real["scheduler_enabled"] else "enabled",
			real["median_wall_ms"],
			real["median_cpu_ms"],
			real["median_db_connects"],
			f"{real['median_db_statements']:g} ({real['median_db_selects']:g})",
			real["median_redis_commands"],
			real["median_redis_connects"],
			real["median_jobs_pushed"],
		]
	]
	if enabled:
		rows.append(
			[
				f"tick1..{result['scaling'][-1]['sites']}.localhost",
				"enabled",
				enabled["median_wall_ms"],
				enabled["median_cpu_ms"],
				enabled["median_db_connects"],
				f"{enabled['median_db_statements']:g} ({enabled['median_db_selects']:g})",
				enabled["median_redis_commands"],
				enabled["median_redis_connects"],
				f"{enabled['mean_jobs_pushed']:.2f} (mean)",
			]
		)
	if result.get("all_due"):
		due = result["all_due"]["per_site"]
		rows.append(
			[
				f"tick1..{result['all_due']['sites']}.localhost",
				"enabled, all due",
				due["median_wall_ms"],
				due["median_cpu_ms"],
				due["median_db_connects"],
				f"{due['median_db_statements']:g} ({due['median_db_selects']:g})",
				due["median_redis_commands"],
				due["median_redis_connects"],
				due["median_jobs_pushed"],
			]
		)
	print("\nPer site per tick (median of the timed ticks):")
	print(table(headers, rows))

	if result["scaling"]:
		print("\nOne tick of Frappe's scheduler over N sites (median of the timed ticks):")
		print(
			table(
				[
					"sites",
					"tick wall ms",
					"tick CPU ms",
					"wall ms / site",
					"CPU ms / site",
					"DB connects",
					"DB statements",
					"Redis commands",
				],
				[
					[
						r["sites"],
						r["tick_wall_ms"],
						r["tick_cpu_ms"],
						r["tick_wall_ms"] / r["sites"],
						r["tick_cpu_ms"] / r["sites"],
						r["tick_db_connects"],
						r["tick_db_statements"],
						r["tick_redis_commands"],
					]
					for r in result["scaling"]
				],
			)
		)
		x = result["extrapolation"]
		print(
			f"\nA push: {x['push_wall_ms']:.2f} ms wall, {x['push_cpu_ms']:.2f} ms CPU, "
			f"{x['push_redis_commands']:.1f} Redis commands"
			f" (all-due ticks against idle ones); {x['due_per_tick']:.2f} due an average tick a site."
		)
		print(
			f"Extrapolated from {x['measured_sites']} measured sites: an average tick {x['site_wall_ms']:.1f} ms wall,"
			f" {x['site_cpu_ms']:.1f} ms CPU a site; one tick every {result['tick_interval_s']} s:"
		)
		print(
			table(
				[
					"sites",
					"tick wall s",
					"tick CPU s",
					"CPU % of a core",
					"DB connects / min",
					"DB statements / min",
					"Redis commands / min",
				],
				[
					[
						r["sites"],
						r["tick_wall_s"],
						r["tick_cpu_s"],
						r["cpu_percent_of_a_core"],
						r["db_connects_per_min"],
						r["db_statements_per_min"],
						r["redis_commands_per_min"],
					]
					for r in x["rows"]
				],
			)
		)

	print("\nServer's own count (SHOW SESSION STATUS before the connection closes) against the client's:")
	print(
		table(
			["site", "server Questions", "client statements", "server Com_select", "client SELECTs"],
			[
				[
					a["site"],
					a.get("server_questions", "-"),
					a["client_statements"],
					a.get("server_com_select", "-"),
					a["client_selects"],
				]
				for a in result["audit"]
			],
		)
	)


if __name__ == "__main__":
	main()
