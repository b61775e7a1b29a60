"""Redis RPC benchmark: ping round trip and a burst of 1,000 commands.

Starts its own redis-server and the scheduler's `CommandListener` in separate
processes (not threads of this one, so caller and listener do not share a
GIL), then measures with the caller every Desk button uses (`protocol.call`)
and raw pipelined LPUSHes for the burst. The listener's dispatcher accepts
every site and schedule and executes nothing: this measures the RPC path, not
the engine.

	scripts/benchmark rpc [--pings 1000] [--burst 1000] [--rounds 5] [--drain-count 100]

Prints a table and writes benchmarks/results/rpc.json (only for the default
drain count; other counts are for comparison).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import signal
import statistics
import subprocess
import sys
import threading
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
if str(REPO) not in sys.path:
	sys.path.insert(0, str(REPO))

import redis  # noqa: E402

from btu.scheduler_daemon.rpc.listener import DRAIN_COUNT, CommandListener  # noqa: E402
from btu.shared import protocol  # noqa: E402
from tests.support.keys import KEYS
from tests.support.redis_server import RedisServer  # noqa: E402

RESULTS = REPO / "benchmarks" / "results" / "rpc.json"


class AcceptingDispatcher:
	"""Every site and schedule exists; execution is free. Isolates the RPC path."""

	def resolve_site(self, site: str | None) -> str:
		return site or "bench.localhost"

	def check_targets(self, site: str, request_type: str, names: list[str]) -> dict[str, str]:
		return {}

	def execute(self, site: str, names: list[str]) -> None:
		return None


def serve(url: str, drain_count: int) -> None:
	"""The listener process: serve until SIGTERM."""
	stop = threading.Event()
	signal.signal(signal.SIGTERM, lambda *_: stop.set())
	listener = CommandListener(
		redis.Redis.from_url(url),
		KEYS,
		AcceptingDispatcher(),
		process_id=f"bench:{os.getpid()}",
		drain_count=drain_count,
	)
	listener.run(stop)


def start_listeners(url: str, count: int, drain_count: int) -> list[subprocess.Popen]:
	command = [sys.executable, __file__, "--serve", url, "--drain-count", str(drain_count)]
	processes = [subprocess.Popen(command) for _ in range(count)]
	client = redis.Redis.from_url(url)
	deadline = time.monotonic() + 30
	while time.monotonic() < deadline:
		if protocol.call(client, KEYS, protocol.PING, timeout=1).ok:
			return processes
	raise RuntimeError("the listener process did not answer a ping within 30 s")


def stop_listeners(processes: list[subprocess.Popen]) -> None:
	for process in processes:
		process.terminate()
	for process in processes:
		process.wait(15)


def percentile(values: list[float], fraction: float) -> float:
	ordered = sorted(values)
	return ordered[min(len(ordered) - 1, int(round(fraction * (len(ordered) - 1))))]


def measure_pings(client: redis.Redis, count: int) -> dict:
	for _ in range(50):
		protocol.call(client, KEYS, protocol.PING)
	round_trips = []
	for _ in range(count):
		reply = protocol.call(client, KEYS, protocol.PING)
		if not reply.ok:
			raise RuntimeError(f"ping failed: {reply.outcome} {reply.message}")
		round_trips.append(reply.round_trip_ms)
	return {
		"count": count,
		"p50_ms": percentile(round_trips, 0.50),
		"p99_ms": percentile(round_trips, 0.99),
		"max_ms": max(round_trips),
		"mean_ms": statistics.fmean(round_trips),
	}


def measure_burst(client: redis.Redis, size: int) -> dict:
	"""LPUSH `size` commands in one pipeline; time until each ACK is on its response key."""
	commands = []
	for n in range(size):
		request_type = (protocol.PING, protocol.CREATE_TASK_SCHEDULE, protocol.CANCEL_TASK_SCHEDULE)[n % 3]
		commands.append(
			protocol.make_command(KEYS, request_type, None if request_type == protocol.PING else f"TS-{n:06d}")
		)
	started = time.perf_counter()
	with client.pipeline(transaction=False) as pipe:
		for command in commands:
			pipe.lpush(KEYS.commands, json.dumps(command))
		pipe.execute()
	# The list is FIFO, so the last command pushed is about the last ACKed: wait for its ACK, then
	# collect the others in one round trip, waiting (within the 5 s window) only for any still missing.
	keys = [command["response_key"] for command in commands]
	last = client.blpop([keys[-1]], timeout=protocol.CALLER_TIMEOUT_SECONDS)
	finished = time.perf_counter()
	with client.pipeline(transaction=False) as pipe:
		for key in keys[:-1]:
			pipe.lpop(key)
		answers = dict(zip(keys[:-1], pipe.execute()))
	answers[keys[-1]] = last[1] if last else None
	for key in keys:
		remaining = protocol.CALLER_TIMEOUT_SECONDS - (time.perf_counter() - started)
		if answers[key] is None and remaining > 0:
			late = client.blpop([key], timeout=remaining)
			if late is not None:
				answers[key] = late[1]
				finished = time.perf_counter()
	acked = sum(1 for answer in answers.values() if answer is not None and json.loads(answer)["status"] == "ok")
	return {"acked": acked, "last_ack_ms": (finished - started) * 1000}


def burst_rounds(client: redis.Redis, size: int, rounds: int) -> dict:
	results = [measure_burst(client, size) for _ in range(rounds)]
	last = [result["last_ack_ms"] for result in results]
	return {
		"size": size,
		"rounds": rounds,
		"acked_min": min(result["acked"] for result in results),
		"last_ack_median_ms": statistics.median(last),
		"last_ack_max_ms": max(last),
	}


def main() -> int:
	parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
	parser.add_argument("--pings", type=int, default=1000)
	parser.add_argument("--burst", type=int, default=1000)
	parser.add_argument("--rounds", type=int, default=5)
	parser.add_argument(
		"--drain-count",
		type=int,
		default=DRAIN_COUNT,
		help=f"commands a listener takes per round trip (default {DRAIN_COUNT}; 1 = one BRPOP per command)",
	)
	parser.add_argument("--serve", metavar="URL", help=argparse.SUPPRESS)
	args = parser.parse_args()
	if args.serve:
		serve(args.serve, args.drain_count)
		return 0

	rows = []
	with RedisServer() as server:
		client = server.client()
		for listeners in (1, 3):
			processes = start_listeners(server.url, listeners, args.drain_count)
			try:
				pings = measure_pings(client, args.pings)
				burst = burst_rounds(client, args.burst, args.rounds)
			finally:
				stop_listeners(processes)
			rows.append(
				{"listener_processes": listeners, "drain_count": args.drain_count, "ping": pings, "burst": burst}
			)
		redis_version = client.info("server")["redis_version"]

	print(
		f"Redis RPC, caller and listener in separate processes (redis-server {redis_version}, loopback, "
		f"drain count {args.drain_count})"
	)
	header = (
		f"{'listeners':>9}  {'ping p50':>9}  {'ping p99':>9}  {'ping max':>9}  "
		f"{'burst':>5}  {'ACKed':>5}  {'last ACK med':>12}  {'last ACK max':>12}"
	)
	print(header)
	print("-" * len(header))
	for row in rows:
		ping, burst = row["ping"], row["burst"]
		print(
			f"{row['listener_processes']:>9}  "
			f"{ping['p50_ms']:>7.3f}ms  {ping['p99_ms']:>7.3f}ms  {ping['max_ms']:>7.2f}ms  "
			f"{burst['size']:>5}  {burst['acked_min']:>5}  "
			f"{burst['last_ack_median_ms']:>10.1f}ms  {burst['last_ack_max_ms']:>10.1f}ms"
		)
	print(
		f"(pings: {args.pings} sequential protocol.call; "
		f"burst: {args.burst} commands in one pipeline, {args.rounds} rounds; "
		f"ACKed = fewest ACKs seen within the 5 s window in a round)"
	)

	if args.drain_count != DRAIN_COUNT:
		return 0
	RESULTS.parent.mkdir(parents=True, exist_ok=True)
	RESULTS.write_text(
		json.dumps(
			{
				"benchmark": "rpc",
				"python": platform.python_version(),
				"redis_py": redis.__version__,
				"redis_server": redis_version,
				"cpus": os.cpu_count(),
				"load_average_at_end": os.getloadavg(),
				"results": rows,
			},
			indent=2,
		)
		+ "\n"
	)
	print(f"wrote {RESULTS.relative_to(REPO)}")
	return 0


if __name__ == "__main__":
	sys.exit(main())
