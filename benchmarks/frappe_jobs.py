r"""Frappe's scheduler and BTU firing the same Scheduled Job Types on one bench: lag from the due moment to enqueue.

Needs a Frappe bench with BTU installed (tier 2's); run it with the bench's Python from the repository root:

    /root/frappe-bench-v16/env/bin/python benchmarks/frappe_jobs.py --bench /root/frappe-bench-v16 \
        --site v16.localhost --minutes 8

Two Scheduled Job Types call a probe (`btu.btu_core.tests.sample_tasks.probe_every_minute`, `Cron` "* * * * *",
and `probe_all`, `All`: every `scheduler_interval`, 240 s unless set), which pushes its RQ job's `enqueued_at` to
a Redis list. One Frappe worker (`frappe worker --queue default,short,long`) runs them throughout.

- Phase A, Frappe's scheduler: BTU Configuration `fire_frappe_jobs` off, Frappe's scheduler process
  (`frappe schedule`) running, for --minutes.
- Phase B, BTU: a BTU scheduler (`btu.scheduler_daemon run --executor frappe`) started and the switch turned on,
  Frappe's scheduler process still running beside it (BTU takes the job types over), for --minutes.

Phase A starts 20 s after a boundary of the `All` interval, so each phase holds whole `All` periods. Each run
belongs to the latest cron slot at or before its `enqueued_at` (a late Frappe enqueue belongs to the slot its tick
reached), in the site's zone. A slot is measured when it lies a minute or more inside its phase (the phase's first
and last minute are the hand-over and the tail); per job type and phase it counts runs, slots with no run
(missed) and runs beyond one per slot (duplicates). Two lags per run: to its slot (enqueued_at - the latest slot),
and from due (enqueued_at - the first slot after the previous run, or the phase, started: the moment Frappe's own
`is_event_due` turns true: a Frappe tick that skipped slots shows here).

Everything it makes is removed at the end, on an error or Ctrl-C too: processes it started (SIGTERM, then kill),
the switch and System Settings as they were, the probe job types and their Scheduled Job Logs.

`--private-redis`: run the bench on a redis-server of its own for the benchmark (its common_site_config's
`redis_cache` and `redis_queue` point at it meanwhile, restored after). BTU's scheduler keys (`btu:scheduler:*`)
are not per bench: a second bench sharing the Redis with a BTU scheduler running would contend for its lease
(Frappe's tick stands back only for an acknowledgement of its own bench, `btu:frappe-jobs:ack:<bench_id>:<site>`).

Prints a table, writes benchmarks/results/scheduled_jobs.json (or --json), and a PNG when matplotlib is installed.
"""

from __future__ import annotations

import argparse
import bisect
import json
import os
import signal
import subprocess
import sys
import time
from datetime import datetime, timezone
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import RESULTS, RedisServer, connect_site, machine, percentile, pyplot, table  # noqa: E402

PROBES = "btu.btu_core.tests.sample_tasks"
EVERY_MINUTE = f"{PROBES}.probe_every_minute"
ALL = f"{PROBES}.probe_all"
PHASE_START_AFTER_BOUNDARY = 20  # seconds after an `All` boundary
MARGIN = 60  # a measured slot lies this far inside its phase
BENCH_LOGS = ("btu.log", "frappe.log", "scheduler.log", "worker.log", "worker.error.log")
NOTABLE = ("Traceback", "Error", "error", "not_run", "not_enqueued", "claimed", "Skipped queueing", "Failed")


class Processes:
	"""The processes the benchmark starts, each logging to its own file; stopped by pid, SIGTERM then kill."""

	def __init__(self, python: str, log_dir: Path):
		self.python = python
		self.log_dir = log_dir
		self.started: dict[str, subprocess.Popen] = {}

	def start(self, name: str, args: list[str], cwd: Path) -> subprocess.Popen:
		log = open(self.log_dir / f"{name}.log", "w")
		process = subprocess.Popen(
			[self.python, *args],
			cwd=cwd,
			stdout=log,
			stderr=subprocess.STDOUT,
			# No scheduler candidate in the worker: each phase's scheduler is the one this script starts.
			env={**os.environ, "PYTHONUNBUFFERED": "1", "BTU_WORKER_CANDIDATE": "0"},
		)
		self.started[name] = process
		return process

	def log(self, name: str) -> str:
		path = self.log_dir / f"{name}.log"
		return path.read_text(errors="replace") if path.exists() else ""

	def check_alive(self) -> None:
		for name, process in self.started.items():
			if process.poll() is not None:
				raise RuntimeError(f"{name} exited with {process.returncode}; see {self.log_dir / (name + '.log')}")

	def stop_all(self) -> None:
		for process in reversed(list(self.started.values())):
			if process.poll() is None:
				process.send_signal(signal.SIGTERM)
		for process in self.started.values():
			try:
				process.wait(30)
			except subprocess.TimeoutExpired:
				process.kill()
				process.wait()


class Benchmark:
	def __init__(self, args):
		self.args = args
		self.bench = args.bench.resolve()
		self.python = str(self.bench / "env" / "bin" / "python")
		self.log_dir = Path(args.log_dir)
		self.log_dir.mkdir(parents=True, exist_ok=True)
		self.processes = Processes(self.python, self.log_dir)
		self.frappe = None
		self.redis = None
		self.common_config = self.bench / "sites" / "common_site_config.json"
		self.common_text = None
		self.saved: dict = {}
		self.job_types: dict[str, str] = {}  # method -> Scheduled Job Type name
		self.created: dict[str, float] = {}  # method -> creation (epoch)
		self.phases: list[tuple[str, float, float]] = []
		self.log_offsets: dict[Path, int] = {}

	# -- setup and teardown ------------------------------------------------------------

	def use_private_redis(self) -> None:
		self.redis = RedisServer().start()
		self.common_text = self.common_config.read_text()
		config = json.loads(self.common_text)
		config.update({"redis_cache": self.redis.url, "redis_queue": self.redis.url})
		self.common_config.write_text(json.dumps(config, indent=1))
		print(f"private redis-server on {self.redis.url} (common_site_config points at it until the end)")

	def set_switch(self, on: int) -> None:
		frappe = self.frappe
		config = frappe.get_single("BTU Configuration")
		config.fire_frappe_jobs = on
		config.save(ignore_permissions=True)
		frappe.db.commit()  # the running scheduler is told after commit

	def setup(self) -> None:
		from btu.btu_core.tests.sample_tasks import FRAPPE_JOB_PROBES

		frappe = self.frappe = connect_site(self.bench, self.args.site)
		self.saved["enable_scheduler"] = frappe.db.get_single_value("System Settings", "enable_scheduler")
		self.saved["fire_frappe_jobs"] = frappe.db.get_single_value("BTU Configuration", "fire_frappe_jobs")
		for key in ("maintenance_mode", "pause_scheduler", "disable_scheduler", "scheduler_tick_interval"):
			if frappe.conf.get(key):
				print(f"warning: {key}={frappe.conf.get(key)} in the site's config", file=sys.stderr)
		frappe.db.set_single_value("System Settings", "enable_scheduler", 1)
		# An active site: Frappe's scheduler runs a dormant site's jobs once a day.
		frappe.get_doc(
			{"doctype": "Activity Log", "subject": "btu benchmark scheduled_jobs", "status": "Success"}
		).insert(ignore_permissions=True)
		from frappe.utils import scheduler as frappe_scheduler

		getattr(frappe_scheduler.schedule_jobs_based_on_activity, "clear_cache", lambda: None)()
		self.set_switch(0)
		self.remove_job_types()
		for method, fields in (
			(EVERY_MINUTE, {"frequency": "Cron", "cron_format": "* * * * *"}),
			(ALL, {"frequency": "All"}),
		):
			job = frappe.get_doc({"doctype": "Scheduled Job Type", "method": method, "create_log": 1, **fields}).insert(
				ignore_permissions=True
			)
			self.job_types[method] = job.name
			self.created[method] = time.time()
		frappe.cache().delete_value(FRAPPE_JOB_PROBES)
		frappe.db.commit()

	def remove_job_types(self) -> None:
		frappe = self.frappe
		for name in frappe.get_all("Scheduled Job Type", filters={"method": ("in", [EVERY_MINUTE, ALL])}, pluck="name"):
			frappe.db.delete("Scheduled Job Log", {"scheduled_job_type": name})
			frappe.db.delete("Scheduled Job Type", {"name": name})
		frappe.db.commit()

	def teardown(self) -> None:
		self.processes.stop_all()
		frappe = self.frappe
		if frappe is not None:
			try:
				frappe.db.rollback()
				if "fire_frappe_jobs" in self.saved:
					self.set_switch(self.saved["fire_frappe_jobs"] or 0)
				self.remove_job_types()
				if "enable_scheduler" in self.saved:
					frappe.db.set_single_value(
						"System Settings", "enable_scheduler", self.saved["enable_scheduler"] or 0
					)
				frappe.db.commit()
			finally:
				frappe.destroy()
		if self.common_text is not None:
			self.common_config.write_text(self.common_text)
		if self.redis is not None:
			self.redis.stop()

	# -- the run -------------------------------------------------------------------------------

	def interval_minutes(self) -> int:
		from btu.shared.scheduled_jobs import DEFAULT_SCHEDULER_INTERVAL

		return max(int(self.frappe.get_conf().scheduler_interval or DEFAULT_SCHEDULER_INTERVAL) // 60, 1)

	def wait(self, until: float) -> None:
		while time.time() < until:
			self.processes.check_alive()
			time.sleep(min(5.0, max(0.0, until - time.time())))

	def frappe_scheduler_holds_lock(self) -> bool:
		from frappe.utils.scheduler import is_schduler_process_running

		return is_schduler_process_running()

	def run(self) -> None:
		from btu.btu_core import scheduler_link
		from btu.shared import protocol

		sites = self.bench / "sites"
		for name in BENCH_LOGS:
			path = self.bench / "logs" / name
			self.log_offsets[path] = path.stat().st_size if path.exists() else 0
		if self.frappe_scheduler_holds_lock():
			raise SystemExit("a Frappe scheduler already runs for this bench (bench start?); stop it first")
		period = self.interval_minutes() * 60
		start = (time.time() // period + 1) * period + PHASE_START_AFTER_BOUNDARY
		if start - period > time.time():
			start -= period
		print(f"phase A (Frappe's scheduler) starts at {iso(start)}, {start - time.time():.0f} s from now")
		self.wait(start)
		# Frappe's scheduler process first: v16's workers start a scheduler thread that takes the bench's lock if free.
		self.processes.start("frappe-schedule", ["-m", "frappe.utils.bench_helper", "frappe", "schedule"], cwd=sites)
		deadline = time.monotonic() + 30
		while not self.frappe_scheduler_holds_lock():
			self.processes.check_alive()
			if time.monotonic() > deadline:
				raise RuntimeError("Frappe's scheduler process did not take its lock within 30 s")
			time.sleep(0.2)
		self.processes.start(
			"frappe-worker",
			["-m", "frappe.utils.bench_helper", "frappe", "worker", "--queue", "default,short,long"],
			cwd=sites,
		)
		phase_a = (start, start + self.args.minutes * 60 + 2 * MARGIN)
		self.wait(phase_a[1])
		self.phases.append(("Frappe's scheduler", *phase_a))

		print(f"phase B (BTU) starts at {iso(time.time())}")
		self.processes.start(
			"btu-scheduler",
			["-m", "btu.scheduler_daemon", "run", "--bench", str(self.bench), "--executor", "frappe"],
			cwd=self.bench,
		)
		deadline = time.monotonic() + 60
		while not scheduler_link.send(protocol.PING).ok:
			self.processes.check_alive()
			if time.monotonic() > deadline:
				raise RuntimeError("the BTU scheduler did not answer a ping within 60 s")
			time.sleep(0.2)
		self.set_switch(1)
		phase_b = (time.time(), time.time() + self.args.minutes * 60 + 2 * MARGIN)
		self.wait(phase_b[1])
		self.phases.append(("BTU (Frappe's scheduler running too)", *phase_b))
		print(f"done at {iso(time.time())}")

	def records(self) -> list[dict]:
		from btu.btu_core.tests.sample_tasks import FRAPPE_JOB_PROBES

		return [json.loads(raw) for raw in self.frappe.cache().lrange(FRAPPE_JOB_PROBES, 0, -1)]

	def job_logs(self) -> dict[str, dict]:
		frappe = self.frappe
		frappe.db.rollback()  # a read after the switch's commit (its after-commit hook) holds an older snapshot
		counts = {}
		for method, name in self.job_types.items():
			statuses = frappe.get_all("Scheduled Job Log", filters={"scheduled_job_type": name}, pluck="status")
			counts[method] = {status: statuses.count(status) for status in sorted(set(statuses))}
		return counts

	def notable_log_lines(self) -> dict[str, list[str]]:
		"""Lines of the bench's logs (written during the run) and of the started processes that may tell of trouble."""
		found = {}
		texts = {}
		for path, offset in self.log_offsets.items():
			if path.exists():
				with open(path, errors="replace") as handle:
					handle.seek(offset)
					texts[f"logs/{path.name}"] = handle.read()
		for name in self.processes.started:
			texts[f"{name}.log"] = self.processes.log(name)
		for source, text in texts.items():
			lines = [line for line in text.splitlines() if any(word in line for word in NOTABLE)]
			if lines:
				found[source] = lines
		return found


# -- slots and lags ---------------------------------------------------------------------------


def iso(epoch: float) -> str:
	return datetime.fromtimestamp(epoch, timezone.utc).isoformat(timespec="milliseconds")


def cron_slots(cron: str, zone: str, start: float, end: float) -> list[float]:
	"""Cron slots (epoch) in [start, end], read in the site's zone."""
	from zoneinfo import ZoneInfo

	from croniter import croniter

	moment = datetime.fromtimestamp(start - 1e-6, ZoneInfo(zone))
	it = croniter(cron, moment)
	slots = []
	while True:
		slot = it.get_next(datetime).timestamp()
		if slot > end:
			return slots
		slots.append(slot)


def analyse(
	records: list[dict], phases, crons: dict[str, str], zone: str, created: dict[str, float]
) -> tuple[list[dict], list[str]]:
	rows, notes = [], []
	first = min(p[1] for p in phases)
	last = max(p[2] for p in phases)
	for method, cron in crons.items():
		runs = sorted(
			(r for r in records if r["method"] == method and r.get("enqueued_at")), key=lambda r: r["enqueued_at"]
		)
		# Every slot from before the first run to after the last, to place each run in its slot.
		slots = cron_slots(
			cron, zone, min([first, created[method]] + [r["enqueued_at"] for r in runs]) - 86400 / 24, last + 3600
		)
		by_slot: dict[float, list[dict]] = {}
		previous_start = created[method]
		for run in runs:
			index = bisect.bisect_right(slots, run["enqueued_at"]) - 1
			run["slot"] = slots[index]
			# Due: the first slot after the previous run started, or after its phase started (no scheduler ran before).
			phase_start = max((p[1] for p in phases if p[1] <= run["enqueued_at"]), default=previous_start)
			run["due"] = slots[bisect.bisect_right(slots, max(previous_start, phase_start))]
			previous_start = run["ran_at"]
			by_slot.setdefault(run["slot"], []).append(run)
		twice = {slot: group for slot, group in by_slot.items() if len(group) > 1}
		for slot, group in sorted(twice.items()):
			notes.append(
				f"{method.rsplit('.', 1)[1]}: slot {iso(slot)} ran {len(group)} times: "
				+ ", ".join(f"enqueued {iso(r['enqueued_at'])} job {r['job_id']}" for r in group)
			)
		for phase, start, end in phases:
			measured = [s for s in slots if start + MARGIN <= s <= end - MARGIN]
			mine = [r for s in measured for r in by_slot.get(s, [])]
			in_phase = [r for r in runs if start <= r["enqueued_at"] < end]
			to_slot = [r["enqueued_at"] - r["slot"] for r in mine]
			from_due = [r["enqueued_at"] - r["due"] for r in mine]
			to_start = [r["ran_at"] - r["slot"] for r in mine]
			rows.append(
				{
					"scheduler": phase,
					"job_type": f"{method.rsplit('.', 1)[1]} ({cron})",
					"slots_measured": len(measured),
					"runs": len(mine),
					"runs_outside_measured_slots": len(in_phase) - len(mine),
					"missed": sum(1 for s in measured if s not in by_slot),
					"duplicates": sum(len(by_slot[s]) - 1 for s in measured if s in by_slot),
					"lag_to_slot_s": summary(to_slot),
					"lag_from_due_s": summary(from_due),
					"slot_to_start_s": summary(to_start),
					"window": [iso(start), iso(end)],
					"runs_detail": [
						{k: (iso(v) if k in ("enqueued_at", "ran_at", "slot", "due") else v) for k, v in r.items()}
						for r in in_phase
					],
				}
			)
	return rows, notes


def summary(values: list[float]) -> dict:
	return {"p50": percentile(values, 50), "p90": percentile(values, 90), "max": max(values) if values else None}


def seconds(value) -> str:
	if value is None:
		return "-"
	return f"{value * 1000:,.1f} ms" if abs(value) < 1 else f"{value:,.1f} s"


def print_table(rows: list[dict]) -> str:
	headers = [
		"scheduler",
		"job type",
		"slots",
		"runs",
		"missed",
		"duplicates",
		"lag to slot p50",
		"p90",
		"max",
		"lag from due p50",
		"p90",
		"max",
		"worker start p50",
	]
	cells = [
		[
			r["scheduler"],
			r["job_type"],
			r["slots_measured"],
			r["runs"],
			r["missed"],
			r["duplicates"],
			seconds(r["lag_to_slot_s"]["p50"]),
			seconds(r["lag_to_slot_s"]["p90"]),
			seconds(r["lag_to_slot_s"]["max"]),
			seconds(r["lag_from_due_s"]["p50"]),
			seconds(r["lag_from_due_s"]["p90"]),
			seconds(r["lag_from_due_s"]["max"]),
			seconds(r["slot_to_start_s"]["p50"]),
		]
		for r in rows
	]
	return table(headers, cells)


def plot(rows: list[dict], path: Path) -> Path | None:
	plt = pyplot()
	if plt is None:
		return None
	figure, axis = plt.subplots(figsize=(9, 4.5))
	for row in rows:
		lags = sorted(
			datetime.fromisoformat(r["enqueued_at"]).timestamp() - datetime.fromisoformat(r["due"]).timestamp()
			for r in row["runs_detail"]
			if "due" in r
		)
		if lags:
			axis.step(
				lags,
				[(i + 1) / len(lags) for i in range(len(lags))],
				where="post",
				label=f"{row['scheduler']}: {row['job_type']}",
			)
	axis.set_xscale("symlog", linthresh=0.01)
	axis.set_xlabel("enqueued_at - due moment (s)")
	axis.set_ylabel("fraction of runs")
	axis.legend(fontsize=7)
	figure.tight_layout()
	figure.savefig(path, dpi=110)
	return path


def reanalyse(path: Path) -> None:
	data = json.loads(path.read_text())
	raw = data["raw"]
	phases = [(p["scheduler"], p["start_epoch"], p["end_epoch"]) for p in data["phases"]]
	rows, notes = analyse(raw["records"], phases, raw["crons"], data["versions"]["site_time_zone"], raw["created"])
	print(print_table(rows))
	for note in notes:
		print(f"SLOT RUN TWICE: {note}")


def main() -> None:
	from btu.shared.run_kind import RunKind

	parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
	parser.add_argument("--bench", type=Path, default=Path(os.environ.get("BTU_BENCH", Path.home() / "frappe-bench")))
	parser.add_argument("--site", default=os.environ.get("BTU_SITE", "test.localhost"))
	parser.add_argument(
		"--minutes", type=int, default=8, help="measured minutes per phase (each phase runs 2 minutes more)"
	)
	parser.add_argument(
		"--private-redis", action="store_true", help="run the bench on a redis-server of its own meanwhile"
	)
	parser.add_argument("--json", type=Path, default=RESULTS / "scheduled_jobs.json")
	parser.add_argument("--plot", type=Path, default=RESULTS / "scheduled_jobs.png")
	parser.add_argument("--log-dir", default="/tmp/btu-bench-frappe-jobs")
	parser.add_argument(
		"--reanalyse", type=Path, help="print the table again from a JSON this script wrote (no bench needed)"
	)
	args = parser.parse_args()
	args.json, args.plot = args.json.resolve(), args.plot.resolve()
	if args.reanalyse:
		return reanalyse(args.reanalyse)

	def terminated(signum, frame):
		raise KeyboardInterrupt(f"signal {signum}")

	signal.signal(signal.SIGTERM, terminated)
	benchmark = Benchmark(args)
	try:
		if args.private_redis:
			benchmark.use_private_redis()
		benchmark.setup()
		frappe = benchmark.frappe
		zone = frappe.utils.get_system_timezone()
		crons = {EVERY_MINUTE: "* * * * *", ALL: f"*/{benchmark.interval_minutes()} * * * *"}
		versions = {
			"frappe": frappe.__version__,
			"site_time_zone": zone,
			"scheduler_interval_s": benchmark.interval_minutes() * 60,
			"scheduler_tick_interval": frappe.get_conf().scheduler_tick_interval
			or "240 (v16 default, clock-aligned) / 60 (v15)",
		}
		benchmark.run()
		records = benchmark.records()
		logs = benchmark.job_logs()
		notable = benchmark.notable_log_lines()
		scheduler_lines = benchmark.processes.log("btu-scheduler").splitlines()
		btu_fires = [line for line in scheduler_lines if RunKind.FRAPPE_JOB.qualifier() in line]
	finally:
		benchmark.teardown()

	rows, notes = analyse(records, benchmark.phases, crons, zone, benchmark.created)
	print(
		f"\nScheduled Job Types fired by Frappe's scheduler, then by BTU, on {args.site} "
		f"(Frappe {versions['frappe']}, zone {zone})"
	)
	print(print_table(rows))
	print(
		"\nlag to slot: enqueued_at - the latest slot at or before it; lag from due: enqueued_at - the first slot after"
	)
	print("the previous run (or the phase) started; worker start: the probe's start - its slot (one worker).")
	print(f"\nruns recorded: {len(records)}; Scheduled Job Logs: {logs}")
	for row in rows:
		if row["runs_outside_measured_slots"]:
			print(
				f"{row['scheduler']} / {row['job_type']}: {row['runs_outside_measured_slots']} run(s) "
				"in the phase's first/last minute (not measured)"
			)
	for note in notes:
		print(f"SLOT RUN TWICE: {note}")
	print(f"\nBTU scheduler lines naming frappe-job: {len(btu_fires)}")
	for line in btu_fires[:200]:
		print(f"  {line}")
	if notable:
		print("\nlog lines that may tell of trouble:")
		for source, lines in notable.items():
			print(f"  {source}:")
			for line in lines[:40]:
				print(f"    {line[:400]}")
	args.json.parent.mkdir(parents=True, exist_ok=True)
	import rq

	data = {
		"benchmark": "scheduled_jobs",
		"ran_at": datetime.now(timezone.utc).isoformat(timespec="seconds"),
		"machine": machine(),
		"versions": {**versions, "rq": rq.__version__},
		"command": " ".join(sys.argv),
		"phases": [
			{"scheduler": p, "start": iso(s), "end": iso(e), "start_epoch": s, "end_epoch": e}
			for p, s, e in benchmark.phases
		],
		"raw": {
			"records": [{k: r[k] for k in ("method", "job_id", "enqueued_at", "ran_at")} for r in records],
			"crons": crons,
			"created": benchmark.created,
		},
		"rows": rows,
		"slots_run_twice": notes,
		"scheduled_job_logs": logs,
		"btu_scheduler_lines": btu_fires,
		"notable_log_lines": notable,
	}
	args.json.write_text(json.dumps(data, indent=1, default=str) + "\n")
	print(f"\n(written to {args.json})")
	path = plot(rows, args.plot)
	if path:
		print(f"(plot: {path})")


if __name__ == "__main__":
	main()
