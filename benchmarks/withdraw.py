"""Withdraw and purge: the Redis time of removing, pausing and editing one schedule while many fires
are prepared, and the longest block of Redis while a whole site is purged (issue 14).

A private redis-server. The prepared set (`btu:prepared`) is filled with members in exactly the form
prepare.lua writes (nine tab-separated fields, score fire_at), each with its rq job hash, and each
member also in its schedule's prepared index (`Keys.prepared_index_key`, score
max(fire_at, prepared ms)), as prepare.lua fills it; the schedules' state hashes hold a numeric
cursor, and the site's schedule set and the due set name them. Code that keeps no index ignores it.

1. With 10k, 100k and 200k prepared fires (100 per schedule over 100, 1,000 and 2,000 schedules):
   `State.remove`, a pause (`State.upsert_many` with paused) and an edit (`State.upsert_many` with a
   new spec fingerprint) of one schedule, each repeated on different schedules (the schedule is put
   back, fires and all, after each). Redis time is the script's `SLOWLOG` duration
   (slowlog-log-slower-than 0).
2. `State.purge_site` of a site of 10,000 schedules with 100,000 prepared fires (and of 1,000 with
   20,000): the longest single command or script in `SLOWLOG` during the purge, the longest wait of a
   `PING` sent every millisecond by another client (what other clients saw, a MULTI block included),
   and the wall time.

	scripts/benchmark withdraw [--reps 20] [--old DIR] [--old-purge 1000x20]

--old runs the same measurements against another checkout's `btu` (e.g. a `git worktree add` of an
older commit), with DIR/.venv/bin/python when it exists, on the same redis-server, and prints both
side by side; --old-purge sets the old run's purge size (the old purge is one MULTI block whose
removals each scan the whole prepared set: 10,000 schedules would block Redis for close to an hour).
Prints a table and writes benchmarks/results/withdraw.json.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
# BTU_SOURCE: the checkout whose `btu` is measured (the --old worker sets it); this one by default.
SOURCE = Path(os.environ.get("BTU_SOURCE") or REPO).resolve()
if str(SOURCE) not in sys.path:
	sys.path.insert(0, str(SOURCE))

import redis  # noqa: E402

from btu.scheduler_daemon.store.jobs import JOB_KEY_PREFIX  # noqa: E402
from btu.scheduler_daemon.store.state import CompiledSchedule, State  # noqa: E402
from btu.shared import protocol  # noqa: E402
from btu.shared.keys import due_member
from tests.support.keys import KEYS

SITE = "bench1.localhost"
QUEUE_KEY = "rq:queue:bench1-default"
FIRES_PER_SCHEDULE = 100
PREPARED_SIZES = (10_000, 100_000, 200_000)
PURGE_SIZES = ((10_000, 10), (1_000, 20))  # (schedules, fires each)
PIPELINE = 10_000
MINUTE_MS = 60_000
# A job hash as prepare.lua writes it (status scheduled, on no queue yet), with rq's usual fields.
JOB_FIELDS = {
	"created_at": "2024-01-01T00:00:00.000000Z",
	"status": "scheduled",
	"origin": "bench1-default",
	"timeout": "60",
	"result_ttl": "600",
	"failure_ttl": "31536000",
	"ttl": "",
	"meta": "\x80\x05}\x94.",
	"last_heartbeat": "2024-01-01T00:00:00.000000Z",
	"worker_name": "",
	"data": "x" * 300,
}


def index_key(site: str, name: str) -> str:
	"""The schedule's prepared index (prepared.lua's index_key); spelled out here as older code has no helper."""
	return f"btu:site:{site}:prepared:{name}"


def schedule_name(n: int) -> str:
	return f"TS-{n:06d}"


# -- filling ------------------------------------------------------------------------------------------


def fill_schedule(pipe, site: str, name: str, fires: int, base_ms: int, fingerprint: str = "fp-0") -> None:
	"""One schedule's state, due entry, and `fires` prepared members (with job hashes) as prepare.lua writes them."""
	state_key = KEYS.schedule_key(site, name)
	counters_key = KEYS.counters_key(site)
	member = due_member(site, name)
	prepared_ms = base_ms - 1000
	for k in range(fires):
		slot = base_ms + k * MINUTE_MS
		job_id = f"{site}::{name}::{slot}"
		entry = "\t".join(
			[job_id, QUEUE_KEY, state_key, counters_key, member, str(slot), str(slot), "0", str(prepared_ms)]
		)
		pipe.hset(JOB_KEY_PREFIX + job_id, mapping={**JOB_FIELDS, "description": f"{name} at {slot}"})
		pipe.zadd(KEYS.prepared, {entry: slot})
		pipe.zadd(index_key(site, name), {entry: max(slot, prepared_ms)})
	cursor = base_ms + fires * MINUTE_MS
	pipe.hset(
		state_key,
		mapping={
			"name": name,
			"fingerprint": fingerprint,
			"spec": "{}",
			"job": "{}",
			"paused": "0",
			"finished": "0",
			"cursor": str(cursor),
			"fire_at": str(cursor),
			"runs": str(fires),
			"modified": "2024-01-01 00:00:00.000000",
		},
	)
	pipe.zadd(KEYS.due, {member: cursor})
	pipe.sadd(KEYS.site_schedules_key(site), name)


def fill(r, site: str, schedules: int, fires: int, base_ms: int) -> None:
	r.sadd(KEYS.sites, site)
	per_pipe = max(1, PIPELINE // (3 * fires + 3))
	for start in range(0, schedules, per_pipe):
		with r.pipeline(transaction=False) as pipe:
			for n in range(start, min(start + per_pipe, schedules)):
				fill_schedule(pipe, site, schedule_name(n), fires, base_ms)
			pipe.execute()


def put_back(r, site: str, name: str, fires: int, base_ms: int) -> None:
	"""Restore one schedule as fill wrote it (after an op withdrew its fires), so every rep sees the same set size."""
	with r.pipeline(transaction=False) as pipe:
		pipe.delete(KEYS.schedule_key(site, name), index_key(site, name))
		fill_schedule(pipe, site, name, fires, base_ms)
		pipe.execute()


# -- measuring ------------------------------------------------------------------------------------------


def slowlog(r) -> list[dict]:
	return [
		{
			"command": (
				e["command"].decode("utf-8", "replace") if isinstance(e["command"], bytes) else str(e["command"])
			)
			.split(" ", 1)[0]
			.upper(),
			"us": int(e["duration"]),
		}
		for e in r.slowlog_get(1_000_000)
	]


def script_us(r) -> int:
	"""The longest script run since the last SLOWLOG RESET, in microseconds."""
	return max((e["us"] for e in slowlog(r) if e["command"] in ("EVALSHA", "EVAL")), default=0)


def upsert(name: str, *, fingerprint: str, paused: bool, now_ms: int) -> CompiledSchedule:
	return CompiledSchedule(
		name=name,
		fingerprint=fingerprint,
		spec={},
		job={},
		paused=paused,
		active=True,
		cursor_if_new=str(now_ms),
		fire_at_if_new=str(now_ms),
		cursor_if_changed=str(now_ms + 3_600_000),
		fire_at_if_changed=str(now_ms + 3_600_000),
		modified="2024-01-01 00:00:01.000000",
	)


def measure_ops(r, state: State, prepared: int, reps: int) -> list[dict]:
	schedules = prepared // FIRES_PER_SCHEDULE
	base_ms = int(time.time() * 1000) + 3_600_000  # an hour ahead: nothing is late or due meanwhile
	r.flushall()
	fill(r, SITE, schedules, FIRES_PER_SCHEDULE, base_ms)
	assert r.zcard(KEYS.prepared) == prepared
	state.remove(SITE, "TS-none")  # loads the script, so no rep pays for it
	ops = {
		"remove": lambda name: state.remove(SITE, name),
		"pause": lambda name: state.upsert_many(SITE, [upsert(name, fingerprint="fp-0", paused=True, now_ms=base_ms)]),
		"edit": lambda name: state.upsert_many(SITE, [upsert(name, fingerprint="fp-1", paused=False, now_ms=base_ms)]),
	}
	rows = []
	step = max(1, schedules // reps)
	for op, run in ops.items():
		times, withdrawn = [], []
		for rep in range(reps):
			name = schedule_name(rep * step % schedules)
			r.slowlog_reset()
			r.config_set("slowlog-log-slower-than", 0)
			run(name)
			r.config_set("slowlog-log-slower-than", -1)
			times.append(script_us(r))
			withdrawn.append(prepared - r.zcard(KEYS.prepared))
			put_back(r, SITE, name, FIRES_PER_SCHEDULE, base_ms)
		rows.append(
			{
				"op": op,
				"prepared": prepared,
				"schedules": schedules,
				"reps": reps,
				"p50_ms": percentile(times, 50) / 1000,
				"max_ms": max(times) / 1000,
				"withdrawn_per_op": sorted(set(withdrawn)),
				"us": times,
			}
		)
		print(
			f"  {op} at {prepared:,} prepared: p50 {rows[-1]['p50_ms']:.3f} ms, max {rows[-1]['max_ms']:.3f} ms",
			file=sys.stderr,
			flush=True,
		)
	return rows


# Another client, in its own process (no GIL shared with the purging one): a PING every millisecond
# until its stdin closes, then the longest it waited and how many it sent.
PROBE = """
import json, select, sys, time, redis
client = redis.Redis.from_url(sys.argv[1], socket_timeout=None)
longest, pings = 0.0, 0
print("ready", flush=True)
while not select.select([sys.stdin], [], [], 0.001)[0]:
	started = time.perf_counter()
	client.ping()
	longest = max(longest, (time.perf_counter() - started) * 1000)
	pings += 1
print(json.dumps({"max_ms": longest, "pings": pings}), flush=True)
"""


class Probe:
	"""The longest a PING of another client waited: the longest Redis kept other clients out (MULTI blocks included)."""

	def __init__(self, url: str):
		self.process = subprocess.Popen(
			[sys.executable, "-c", PROBE, url], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
		)
		self.process.stdout.readline()
		self.max_ms, self.pings = 0.0, 0

	def stop(self) -> None:
		self.process.stdin.close()
		found = json.loads(self.process.stdout.readline())
		self.process.wait()
		self.max_ms, self.pings = found["max_ms"], found["pings"]


def measure_purge(r, url: str, state: State, schedules: int, fires: int) -> dict:
	base_ms = int(time.time() * 1000) + 3_600_000
	r.flushall()
	fill(r, SITE, schedules, fires, base_ms)
	prepared = r.zcard(KEYS.prepared)
	r.slowlog_reset()
	r.config_set("slowlog-log-slower-than", 0)
	probe = Probe(url)
	time.sleep(0.05)
	started = time.perf_counter()
	state.purge_site(SITE)
	wall = time.perf_counter() - started
	probe.stop()
	r.config_set("slowlog-log-slower-than", -1)
	entries = [e for e in slowlog(r) if e["command"] not in ("PING", "SLOWLOG", "CONFIG")]
	longest = max(entries, key=lambda e: e["us"], default={"command": "-", "us": 0})
	left = r.zcard(KEYS.prepared) + r.scard(KEYS.site_schedules_key(SITE))
	row = {
		"schedules": schedules,
		"prepared": prepared,
		"longest_command_ms": longest["us"] / 1000,
		"longest_command": longest["command"],
		"scripts": sum(1 for e in entries if e["command"] in ("EVALSHA", "EVAL")),
		"script_total_ms": sum(e["us"] for e in entries if e["command"] in ("EVALSHA", "EVAL")) / 1000,
		"longest_ping_wait_ms": probe.max_ms,
		"pings": probe.pings,
		"wall_s": wall,
		"left_behind": left,
	}
	print(
		f"  purge {schedules:,} schedules / {prepared:,} prepared: "
		f"longest {longest['command']} {row['longest_command_ms']:.1f} ms, "
		f"longest PING wait {probe.max_ms:.1f} ms, wall {wall:.2f} s",
		file=sys.stderr,
		flush=True,
	)
	return row


def percentile(values: list[float], p: float) -> float:
	ordered = sorted(values)
	k = (len(ordered) - 1) * p / 100
	lo = int(k)
	hi = min(lo + 1, len(ordered) - 1)
	return ordered[lo] + (ordered[hi] - ordered[lo]) * (k - lo)


def measure(url: str, reps: int, purge_sizes: list[tuple[int, int]]) -> dict:
	r = redis.Redis.from_url(url, socket_timeout=None)
	r.config_set("slowlog-log-slower-than", -1)  # on only while an op or a purge runs: filling logs nothing
	r.config_set("slowlog-max-len", 1_000_000)
	state = State(r, KEYS)
	ops = [row for prepared in PREPARED_SIZES for row in measure_ops(r, state, prepared, reps)]
	purges = [measure_purge(r, url, state, schedules, fires) for schedules, fires in purge_sizes]
	r.flushall()
	commit = subprocess.run(
		["git", "-C", str(SOURCE), "log", "-1", "--format=%h %s"], capture_output=True, text=True
	).stdout.strip()
	return {"source": str(SOURCE), "commit": commit, "ops": ops, "purges": purges}


# -- the run --------------------------------------------------------------------------------------------


def size(text: str) -> tuple[int, int]:
	schedules, _, fires = text.partition("x")
	return int(schedules), int(fires)


def run_old(old: Path, url: str, reps: int, purge: tuple[int, int]) -> dict:
	python = old / ".venv" / "bin" / "python"
	out = Path(tempfile.mkstemp(prefix="btu-withdraw-", suffix=".json")[1])
	env = {**os.environ, "BTU_SOURCE": str(old), "PYTHONPATH": str(old)}
	command = [
		str(python if python.exists() else sys.executable),
		str(Path(__file__).resolve()),
		"--worker",
		url,
		"--reps",
		str(reps),
		"--purge",
		f"{purge[0]}x{purge[1]}",
		"--out",
		str(out),
	]
	subprocess.run(command, cwd=old, env=env, check=True)
	data = json.loads(out.read_text())
	out.unlink()
	return data


def main() -> int:
	parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
	parser.add_argument("--reps", type=int, default=20)
	parser.add_argument(
		"--old", type=Path, help="another checkout to measure side by side (e.g. a worktree of an older commit)"
	)
	parser.add_argument(
		"--old-purge", type=size, default=(1_000, 20), help="the old run's purge: SCHEDULESxFIRES (default 1000x20)"
	)
	parser.add_argument("--worker", metavar="REDIS_URL", help=argparse.SUPPRESS)
	parser.add_argument("--purge", type=size, action="append", help=argparse.SUPPRESS)
	parser.add_argument("--out", type=Path, help=argparse.SUPPRESS)
	args = parser.parse_args()

	if args.worker:  # measuring BTU_SOURCE's btu for the parent
		args.out.write_text(json.dumps(measure(args.worker, args.reps, args.purge or list(PURGE_SIZES))))
		return 0

	from benchmarks import common

	server = common.start_redis()
	try:
		print(f"new: {SOURCE}", file=sys.stderr, flush=True)
		new = measure(server.url, args.reps, list(PURGE_SIZES))
		old = None
		if args.old:
			print(f"old: {args.old.resolve()}", file=sys.stderr, flush=True)
			old = run_old(args.old.resolve(), server.url, args.reps, args.old_purge)
	finally:
		server.close()

	def cell(run, key, **match):
		found = next(
			(
				row
				for row in (run or {}).get("ops" if "op" in match else "purges", [])
				if all(row.get(k) == v for k, v in match.items())
			),
			None,
		)
		return found.get(key) if found else None

	print(f"\nnew: {new['commit']}" + (f"\nold: {old['commit']}" if old else ""))
	print(
		f"One schedule withdrawn, Redis time of its script (SLOWLOG), {args.reps} schedules each, "
		f"{FIRES_PER_SCHEDULE} fires per schedule prepared"
	)
	print(
		common.table(
			[
				"op",
				"prepared fires",
				"schedules",
				"new p50 (ms)",
				"new max (ms)",
				*(["old p50 (ms)", "old max (ms)"] if old else []),
			],
			[
				[
					row["op"],
					row["prepared"],
					row["schedules"],
					row["p50_ms"],
					row["max_ms"],
					*(
						[
							cell(old, "p50_ms", op=row["op"], prepared=row["prepared"]),
							cell(old, "max_ms", op=row["op"], prepared=row["prepared"]),
						]
						if old
						else []
					),
				]
				for row in new["ops"]
			],
		)
	)
	print("\nA site purged (State.purge_site)")
	purges = [("new", row) for row in new["purges"]] + [("old", row) for row in (old or {}).get("purges", [])]
	print(
		common.table(
			[
				"code",
				"schedules",
				"prepared fires",
				"longest command (ms)",
				"longest PING wait (ms)",
				"scripts total (ms)",
				"wall (s)",
				"left behind",
			],
			[
				[
					code,
					row["schedules"],
					row["prepared"],
					f"{row['longest_command_ms']:.2f} ({row['longest_command']})",
					row["longest_ping_wait_ms"],
					row["script_total_ms"],
					row["wall_s"],
					row["left_behind"],
				]
				for code, row in purges
			],
		)
	)
	path = common.write_result(
		"withdraw", {"reps": args.reps, "fires_per_schedule": FIRES_PER_SCHEDULE, "new": new, "old": old}
	)
	print(f"\n{path}")
	return 0


if __name__ == "__main__":
	sys.exit(main())
