"""Fire lag: BTU against its peers doing the same work, each on a fresh private Redis.

Scenarios:
- `100x1s`: 100 schedules due every second (100 fires/s), for --seconds (default 25);
  a SimpleWorker runs the jobs, so lag is shown to enqueue and to the worker's start.
- `10kx10s`: 10,000 schedules every 10 s, staggered by second (1,000 fires/s), for
  --seconds-10k (default 12); no worker (jobs are popped and their hashes read as they
  arrive), except RQ's own scheduler, which only runs inside a worker.

Lag of a slot = (first fire of its schedule at or after the slot) - slot, with the fire
time read from the job hash's `enqueued_at`; "seen" takes instead the time an observer
popped the job (when a worker could first have taken it: a scheduler that stamps many
jobs before pushing them shows it here), and "start" the time a worker started it. A slot with
no fire after it by the end is "unserved"; "fires" counts the jobs enqueued from the first
slot on (fewer fires than slots: the system coalesced or dropped slots).

The defaults keep the whole run (7 systems, 2 scenarios) within 10 minutes on 2 cores;
`--systems btu --seconds 300` is the 5-minute run for BTU alone.

`--metrics both` runs BTU twice, its metrics endpoint off and on (scraped every second), side by side.

    scripts/benchmark fire_lag [--seconds 25] [--seconds-10k 12] [--systems btu,aps] [--metrics off|on|both]
"""

from __future__ import annotations

import argparse
import math
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks import common  # noqa: E402
from benchmarks.observe import Observer, anchored_on_first_fire, collect, slot_lags  # noqa: E402
from benchmarks.peers import (  # noqa: E402
	BIN,
	QUEUE_KEY,
	APScheduler,
	Peer,
	RqCron,
	RqOwnScheduler,
	RqScheduler,
	Schedule,
	new_log_dir,
	popen,
)

SYSTEMS = ("btu", "rqs60", "rqs1", "rqat", "rqcron", "aps", "apsbest")
SCENARIOS = {
	"100x1s": {"count": 100, "period": 1, "stagger": 1, "worker": True},
	"10kx10s": {"count": 10000, "period": 10, "stagger": 10, "worker": False},
}


def make_peer(key: str, url: str, log_dir: Path) -> Peer:
	return {
		"rqs60": lambda: RqScheduler(url, log_dir, 60),
		"rqs1": lambda: RqScheduler(url, log_dir, 1),
		"rqat": lambda: RqOwnScheduler(url, log_dir),
		"rqcron": lambda: RqCron(url, log_dir),
		"aps": lambda: APScheduler(url, log_dir, best=False),
		"apsbest": lambda: APScheduler(url, log_dir, best=True),
	}[key]()


def schedules_for(scenario: dict, t0: float) -> list[Schedule]:
	return [Schedule(i, t0 + i % scenario["stagger"], scenario["period"]) for i in range(scenario["count"])]


def summarise(
	system: str, settings: str, scenario_name: str, schedules, enq, started, start, end, note="", seen=None
) -> dict:
	e = slot_lags(schedules, enq, start, end)
	row = {
		"system": system,
		"settings": settings,
		"scenario": scenario_name,
		"slots": e["slots"],
		"unserved": e["unserved"],
		"fires": e["fires"],
		"enqueue": common.lag_summary(e["lags"]),
		"note": note,
		"enqueue_lags": e["lags"],
	}
	for key, times in (("seen", seen), ("start", started)):
		if times is not None:
			row[key] = common.lag_summary(slot_lags(schedules, times, start, end)["lags"])
	return row


def run_btu(
	bench: common.DevBench, scenario_name: str, scenario: dict, seconds: float, log_dir: Path, metrics: bool = False
) -> dict:
	count, period, stagger = scenario["count"], scenario["period"], scenario["stagger"]
	with bench.data.conn.cursor() as cur:
		cur.execute("DELETE FROM `tabBTU Task Schedule`")
	cron = (lambda i: "* * * * * *") if period == 1 else (lambda i: f"{i % stagger}/{period} * * * * *")
	bench.insert_schedules(
		[{"run_frequency": "Cron Style", "cron_string": cron(i), "argument_overrides": {"i": i}} for i in range(count)]
	)
	server = common.start_redis()
	r = server.client()
	scheduler, scraper = common.start_btu(bench, server.url, "rq", metrics, log=open(log_dir / "btu.log", "w"))
	worker = observer = None
	try:
		common.wait_for_schedules(r, count)
		if scenario["worker"]:
			worker = popen(
				[
					str(BIN / "rq"),
					"worker",
					"--url",
					server.url,
					"-w",
					"rq.worker.SimpleWorker",
					bench.bench.queue_name("default"),
				],
				log_dir / "btu-worker.log",
			)
		else:
			observer = Observer(r, bench.queue).start()
		# Schedule i's cron fires at seconds congruent to i mod stagger, so the first slot must be a multiple of it.
		t0 = math.ceil((time.time() + 2) / stagger) * stagger
		end = t0 + seconds
		time.sleep(end + 2 - time.time())
		common.stop(scheduler)
		schedules = schedules_for(scenario, t0)
		enq, started, seen = collect(r, observer if not worker else None)
		settings = "defaults (executor rq)" + (f", {common.metrics_setting(True)}" if metrics else "")
		return summarise("BTU", settings, scenario_name, schedules, enq, started, t0, end, seen=seen)
	finally:
		if scraper:
			scraper.stop()
		common.stop(scheduler)
		if worker:
			common.stop(worker)
		server.close()


def run_peer(key: str, scenario_name: str, scenario: dict, seconds: float, log_dir: Path) -> dict:
	server = common.start_redis()
	r = server.client()
	peer = make_peer(key, server.url, log_dir)
	if scenario["stagger"] > 1 and not peer.can_stagger:
		server.close()
		return {
			"system": peer.name,
			"settings": peer.settings,
			"scenario": scenario_name,
			"slots": None,
			"note": (
				"cannot do it: interval jobs all start with the process (no per-schedule offset) "
				"and cron is minute-precision"
			),
		}
	count = scenario["count"]
	pre_created = count * (seconds / scenario["period"] + 1) if isinstance(peer, RqOwnScheduler) else count
	lead = 3 + pre_created / 1500 + (count / 400 if isinstance(peer, APScheduler) else 0)
	t0 = math.ceil(time.time() + lead)
	end = t0 + seconds
	schedules = schedules_for(scenario, t0)
	worker = observer = None
	try:
		peer.prepare(schedules, end)
		peer.start()
		peer.ready(r)
		note = ""
		if time.time() > t0:
			note = f"setup overran the first slot by {time.time() - t0:.1f} s"
		use_worker = scenario["worker"] or peer.runs_worker
		if use_worker and not peer.runs_worker:
			worker = popen(peer.worker_command(), log_dir / f"{key}-worker.log")
		if not use_worker:
			observer = Observer(r, QUEUE_KEY).start()
		grace = 62 if key == "rqs60" else 3
		time.sleep(max(0, end + grace - time.time()))
		peer.stop()
		enq, started, seen = collect(r, observer if not use_worker else None)
		if not peer.can_stagger:
			schedules = anchored_on_first_fire(schedules, enq, t0)
			note = (
				note + "; " if note else ""
			) + "slots counted from each job's first fire (RQ cron picks its own start)"
		if peer.runs_worker and not scenario["worker"]:
			note = (note + "; " if note else "") + "its scheduler runs inside the worker, so a worker runs the jobs too"
		return summarise(
			peer.name,
			peer.settings,
			scenario_name,
			schedules,
			enq,
			started if scenario["worker"] else None,
			t0,
			end,
			note,
			seen,
		)
	finally:
		peer.stop()
		if worker:
			common.stop(worker)
		server.close()


def print_table(rows: list[dict]) -> str:
	headers = [
		"scenario",
		"system",
		"settings",
		"slots",
		"unserved",
		"fires",
		"enq p50 ms",
		"enq p90",
		"enq p99",
		"enq max",
		"seen p50 ms",
		"seen p99",
		"seen max",
		"start p50 ms",
		"start p99",
		"start max",
		"note",
	]
	out = []
	for row in rows:
		e = row.get("enqueue") or {}
		v = row.get("seen") or {}
		s = row.get("start") or {}
		out.append(
			[
				row["scenario"],
				row["system"],
				row["settings"],
				row.get("slots"),
				row.get("unserved"),
				row.get("fires"),
				e.get("p50_ms"),
				e.get("p90_ms"),
				e.get("p99_ms"),
				e.get("max_ms"),
				v.get("p50_ms"),
				v.get("p99_ms"),
				v.get("max_ms"),
				s.get("p50_ms"),
				s.get("p99_ms"),
				s.get("max_ms"),
				row.get("note", ""),
			]
		)
	text = common.table(headers, out)
	print(text)
	return text


def plot(rows: list[dict], path: Path) -> None:
	plt = common.pyplot()
	if plt is None:
		return
	scenarios = sorted({row["scenario"] for row in rows})
	fig, axes = plt.subplots(1, len(scenarios), figsize=(7 * len(scenarios), 5), squeeze=False)
	for ax, scenario in zip(axes[0], scenarios):
		for row in rows:
			lags = sorted(row.get("enqueue_lags") or [])
			if row["scenario"] != scenario or not lags:
				continue
			ax.plot(
				[max(v, 0.01) for v in lags],
				[(k + 1) / len(lags) for k in range(len(lags))],
				label=f"{row['system']} {row['settings']}",
			)
		ax.set_xscale("log")
		ax.set_xlabel("lag from slot to enqueued_at (ms, log)")
		ax.set_ylabel("fraction of slots")
		ax.set_title(f"fire lag CDF, {scenario}")
		ax.grid(True, which="both", alpha=0.3)
		ax.legend(fontsize=7)
	fig.tight_layout()
	fig.savefig(path, dpi=110)


def main() -> None:
	parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
	parser.add_argument(
		"--seconds", type=float, default=25, help="duration of the 100x1s scenario per system (default 25)"
	)
	parser.add_argument(
		"--seconds-10k", type=float, default=12, help="duration of the 10kx10s scenario per system (default 12)"
	)
	common.add_systems_argument(parser, SYSTEMS)
	parser.add_argument(
		"--scenarios", default=",".join(SCENARIOS), help=f"comma-separated, from {', '.join(SCENARIOS)}"
	)
	common.add_metrics_argument(parser)
	args = parser.parse_args()
	systems = [s for s in args.systems.split(",") if s]
	log_dir = new_log_dir("fire-lag")
	bench = common.DevBench("redis://127.0.0.1:1/0")
	rows = []
	try:
		for name in [s for s in args.scenarios.split(",") if s]:
			scenario = SCENARIOS[name]
			seconds = args.seconds if name == "100x1s" else args.seconds_10k
			for system in systems:
				print(f"-- {name} {system} ({seconds:g} s)", file=sys.stderr, flush=True)
				for metrics in common.metrics_modes(args.metrics) if system == "btu" else [False]:
					try:
						if system == "btu":
							row = run_btu(bench, name, scenario, seconds, log_dir, metrics)
						else:
							row = run_peer(system, name, scenario, seconds, log_dir)
					except Exception as exc:  # one system failing must not lose the others' figures
						row = {
							"system": system,
							"settings": "",
							"scenario": name,
							"note": f"failed: {type(exc).__name__}: {exc}",
						}
					row["seconds"] = seconds
					rows.append(row)
	finally:
		bench.close()
	png = common.RESULTS / "fire_lag.png"
	common.RESULTS.mkdir(parents=True, exist_ok=True)
	complete = set(systems) == set(SYSTEMS) and set(args.scenarios.split(",")) == set(SCENARIOS)
	if complete:  # the plot needs every run's samples; a partial run keeps the last full run's plot
		plot(rows, png)
	for row in rows:
		row.pop("enqueue_lags", None)
	rows = common.merge_previous("fire_lag", rows, ("system", "settings", "scenario"))
	text = print_table(rows)
	path = common.write_result("fire_lag", {"args": vars(args), "rows": rows, "table": text})
	print(
		f"\nwrote {path}"
		+ (f" and {png}" if complete else f"; {png} is left from the last full run")
		+ f" (logs in {log_dir})"
	)


if __name__ == "__main__":
	main()
