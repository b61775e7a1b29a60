"""How long an RPC's edit waits behind full reconciles of big sites (issue 29), in one process.

A private MariaDB and Redis; a dev bench of --sites sites x --schedules schedules (a daily cron), the reader
granted. A `Reconciler` runs `full()` back to back on one thread, as a scheduler at --full-refresh-interval-secs 1
does; this thread adds a schedule to the first site every 0-0.4 s (random), as SQL would, then calls
`sync` for it, as the listener does for the RPC Frappe sends after the commit, and times that call. Each
edit changes the site's checksum, so the next pass diffs the site: it reads every row's version (10,000 rows) and
compares them with what it compiled. No listener, firing or status threads: the figure is the reconciler's lock.

    .venv/bin/python benchmarks/edit_wait.py [--sites 2] [--schedules 10000] [--edits 40]
    .venv/bin/python benchmarks/edit_wait.py --source /tmp/old-tree   # the reconciler of another checkout (its btu/)

Writes benchmarks/results/edit_wait.json (edit_wait_source.json with --source).
"""

from __future__ import annotations

import argparse
import inspect
import json
import os
import random
import shutil
import statistics
import sys
import threading
import time
from datetime import datetime, timezone
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent


def main() -> None:
	parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
	parser.add_argument("--sites", type=int, default=2)
	parser.add_argument("--schedules", type=int, default=10000, help="schedules per site")
	parser.add_argument("--edits", type=int, default=40)
	parser.add_argument(
		"--source", help="a checkout whose btu/ is imported instead of this one's (the bench is made by this one)"
	)
	args = parser.parse_args()
	sys.path.insert(0, str(REPO))
	from benchmarks import common
	from benchmarks.scale import ScaleBench, grant_reader, now_load
	from tests.support.mariadb_server import MariaDBServer

	server = MariaDBServer(max_connections=151).start()
	redis_server = common.start_redis()
	bench = None
	try:
		bench = ScaleBench(server, [f"s{i:04d}.localhost" for i in range(args.sites)]).create(redis_server.url)
		bench.fill(args.schedules, f"0 {(datetime.now(timezone.utc).hour + 12) % 24} * * *")
		grant_reader(bench)
		if args.source:
			# The reconciler of the other tree: its btu package first on the path, nothing of this tree's imported yet.
			for name in [name for name in sys.modules if name == "btu" or name.startswith("btu.")]:
				del sys.modules[name]
			sys.path.insert(0, str(Path(args.source).resolve()))
		result = measure(bench, redis_server, args.edits)
		result.update(args=vars(args), machine=common.machine(), load_at_end=now_load(), code=code(args.source))
	finally:
		if bench is not None:
			bench.close()
		redis_server.close()
		server.close()
	name = "edit_wait_source" if args.source else "edit_wait"
	path = REPO / "benchmarks" / "results" / f"{name}.json"
	path.write_text(json.dumps(result, indent=1) + "\n")
	print(json.dumps({k: v for k, v in result.items() if k not in ("machine", "waits_ms")}, indent=1))
	print(f"wrote {path}")


def scheduler_module(*paths: str):
	"""A scheduler module at the first of `paths` (this tree's first, then an older checkout's: --source) it has."""
	import importlib

	for path in paths[:-1]:
		try:
			return importlib.import_module(f"btu.scheduler_daemon.{path}")
		except ModuleNotFoundError:
			continue
	return importlib.import_module(f"btu.scheduler_daemon.{paths[-1]}")


def measure(bench, redis_server, edits: int) -> dict:
	from tests.support.keys import KEYS

	State = scheduler_module("store.state", "leading.state", "state").State
	Connections = scheduler_module("reads.connections", "connections").Connections
	connect = scheduler_module("reads.database", "database").connect
	reconcile = scheduler_module("reconcile.reconciler", "reconcile")
	Reconciler = reconcile.Reconciler

	r = redis_server.client()
	# An older tree's State (--source) names the keys itself.
	state = State(r, KEYS) if "keys" in inspect.signature(State).parameters else State(r)
	reconciler = Reconciler(
		bench.path,
		state,
		"frappe",
		lambda: datetime.now(timezone.utc),
		lambda: None,
		connections=Connections(connect, 4, 60.0),
	)
	started = time.perf_counter()
	reconciler.full()
	cold_s = time.perf_counter() - started
	site = bench.sites[0]
	stop = threading.Event()
	passes: list[float] = []

	def loop() -> None:
		while not stop.is_set():
			t = time.perf_counter()
			reconciler.full()
			passes.append(time.perf_counter() - t)

	# An older tree's reconciler (--source) names it sync_schedules.
	sync = getattr(reconciler, "sync", None) or reconciler.sync_schedules
	thread = threading.Thread(target=loop)
	thread.start()
	waits = []
	try:
		for _ in range(edits):
			time.sleep(random.uniform(0, 0.4))
			name = bench.insert_schedule(site, run_frequency="Cron Style", cron_string="30 5 * * *")
			t = time.perf_counter()
			sync(site, [name])
			waits.append((time.perf_counter() - t) * 1000)
	finally:
		stop.set()
		thread.join()
	ordered = sorted(waits)
	return {
		"benchmark": "edit_wait",
		"reconciler": reconcile.__file__,
		"ran_at": datetime.now(timezone.utc).isoformat(timespec="seconds"),
		"cold_full_s": cold_s,
		"passes": len(passes),
		"pass_median_s": statistics.median(passes) if passes else None,
		"edits": len(waits),
		"wait_p50_ms": ordered[len(ordered) // 2],
		"wait_p90_ms": ordered[int(len(ordered) * 0.9)],
		"wait_max_ms": ordered[-1],
		"waits_ms": waits,
		"load": " / ".join(f"{x:.2f}" for x in os.getloadavg()),
	}


def code(source: str | None) -> dict:
	import subprocess

	tree = Path(source).resolve() if source else REPO
	done = subprocess.run(["git", "-C", str(tree), "rev-parse", "--short", "HEAD"], capture_output=True, text=True)
	return {"tree": str(tree), "commit": done.stdout.strip() or None, "git": shutil.which("git") is not None}


if __name__ == "__main__":
	main()
