"""RPC flood: how long a real scheduler takes to drain 50,000 valid commands, and what a Desk save waits meanwhile.

A private redis-server, a dev bench whose site has 1,000 schedules (daily at 03:00, so nothing fires
meanwhile) and the real `btu-scheduler run` at log level INFO: its listener, dispatcher and reconciler
against MariaDB. Two floods, pushed in pipelines: every command naming one schedule, and commands
cycling over the 1,000 schedules (create and cancel alternating). Halfway through each flood a Desk-like
`protocol.call(create_task_schedule)` is sent; its ACK round trip is how long a Desk save waits (the
Desk gives up after 5 s; here the call waits up to 10 minutes, to measure it).

	scripts/benchmark rpc_flood [--commands 50000] [--source DIR]

--source runs the scheduler from another checkout (e.g. a `git worktree add` of an older commit), to
compare; the bench, the floods and the measuring are this checkout's. Prints a table.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import threading
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
if str(REPO) not in sys.path:
	sys.path.insert(0, str(REPO))

from benchmarks import common  # noqa: E402
from btu.shared import protocol  # noqa: E402
from tests.support.keys import KEYS

SCHEDULES = 1000
PIPELINE = 5000
DESK_TIMEOUT = 600


def push(r, commands: list[dict]) -> None:
	for start in range(0, len(commands), PIPELINE):
		with r.pipeline(transaction=False) as pipe:
			for command in commands[start : start + PIPELINE]:
				pipe.lpush(KEYS.commands, json.dumps(command))
			pipe.execute()


def flood(r, names: list[str], count: int) -> dict:
	"""Push `count` commands over `names`, a Desk call after the first half; time the drain and the call."""
	types = (protocol.CREATE_TASK_SCHEDULE, protocol.CANCEL_TASK_SCHEDULE)
	commands = [
		protocol.make_command(KEYS, types[n % 2], names[n % len(names)], site=common.SITE) for n in range(count)
	]
	desk: dict = {}

	def desk_call():
		desk["reply"] = protocol.call(
			r, KEYS, protocol.CREATE_TASK_SCHEDULE, names[0], site=common.SITE, timeout=DESK_TIMEOUT
		)

	started = time.perf_counter()
	push(r, commands[: count // 2])
	caller = threading.Thread(target=desk_call)
	caller.start()
	time.sleep(0.01)  # the Desk's command lands behind the first half
	push(r, commands[count // 2 :])
	last = r.blpop([commands[-1]["response_key"]], timeout=DESK_TIMEOUT)
	drained = time.perf_counter() - started
	caller.join()
	with r.pipeline(transaction=False) as pipe:
		for command in commands[:-1]:
			pipe.llen(command["response_key"])
		acked = sum(pipe.execute()) + (last is not None)
	reply = desk["reply"]
	return {
		"commands": count,
		"schedules": len(names),
		"acked": acked,
		"drain_s": drained if last is not None else None,
		"desk_ack_ms": reply.round_trip_ms if reply.ok else None,
		"desk_within_5s": reply.ok and reply.round_trip_ms < protocol.CALLER_TIMEOUT_SECONDS * 1000,
	}


def main() -> int:
	parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
	parser.add_argument("--commands", type=int, default=50_000)
	parser.add_argument(
		"--source", type=Path, default=REPO, help="the checkout the scheduler runs from (default: this one)"
	)
	args = parser.parse_args()
	source = args.source.resolve()
	server = common.start_redis()
	bench = common.DevBench(server.url)
	log_path = Path(f"/tmp/btu-rpc-flood-{os.getpid()}.log")
	rows = []
	try:
		names = bench.insert_schedules([{"run_frequency": "Daily", "hour": 3, "minute": 0}] * SCHEDULES)
		r = server.client(socket_timeout=None)
		command = common.scheduler_command(bench, server.url, extra=["--log-level", "INFO"])
		env = {**os.environ, "PYTHONPATH": str(source)}
		with open(log_path, "wb") as log:
			scheduler = subprocess.Popen(command, cwd=source, env=env, stdout=log, stderr=subprocess.STDOUT)
		try:
			common.wait_for_schedules(r, SCHEDULES)
			if not protocol.call(r, KEYS, protocol.PING, timeout=30).ok:
				raise RuntimeError(f"the scheduler does not answer; see {log_path}")
			for label, over in (("one schedule", names[:1]), (f"{SCHEDULES:,} schedules", names)):
				rows.append({"flood": label, **flood(r, over, args.commands)})
		finally:
			common.stop(scheduler)
	finally:
		bench.close()
		server.close()

	commit = subprocess.run(
		["git", "-C", str(source), "log", "-1", "--format=%h %s"], capture_output=True, text=True
	).stdout.strip()
	print(f"RPC flood through a real scheduler (source {source}: {commit}; log {log_path})")
	print(
		common.table(
			[
				"flood",
				"commands",
				"ACKs on their keys at the end (60 s TTL)",
				"drain (s)",
				"Desk call ACK (ms)",
				"Desk within 5 s",
			],
			[
				[
					row["flood"],
					row["commands"],
					row["acked"],
					row["drain_s"] if row["drain_s"] is not None else "not drained",
					row["desk_ack_ms"] if row["desk_ack_ms"] is not None else "no ACK",
					"yes" if row["desk_within_5s"] else "no",
				]
				for row in rows
			],
		)
	)
	return 0


if __name__ == "__main__":
	sys.exit(main())
