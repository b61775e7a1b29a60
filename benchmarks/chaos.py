"""Chaos: three schedulers, 200 fires/s, the leader SIGKILLed at random, Redis restarted, MariaDB unreachable,
BTU's own state corrupted.

Loopback only and bounded in time (--minutes, default 10). 200 schedules fire every second
(cron `* * * * * *`, catch-up `fire_all`). Every 2-10 s (random) the leader (read from the
lease key) is killed with SIGKILL and a fresh scheduler is started so three keep running.
At a third of the run Redis (append-only file, fsync always) is stopped and restarted; at
two thirds the site's database becomes unreachable for 30 s: the dev bench's site points at
a TCP proxy in front of 127.0.0.1:3306, and the proxy is stopped (the machine's MariaDB keeps
running). Every --corrupt-every seconds (default 20) one kind of key or member BTU owns is made
wrong, drawn from tests/reliability/test_corrupt_state.py's table (all but the prepared set
replaced, which deletes the fires in it); a schedule-level fault hits one of the first
VICTIMS schedules, which are not counted as healthy. No worker runs: at the end every job id
pushed on the queue is counted.

Reported: duplicates (a job id pushed more than once; ids are deterministic per
(site, schedule, slot), so a second enqueue of a slot shows here), missing slots (a second of
the window with no job for some healthy schedule), and the worst fire lag (job hash
`enqueued_at` - slot) in the 15 s after each failure.

With --sentinel the site's queue Redis is a real Sentinel topology (a master, a replica, three
sentinels; tests/support/sentinel.py) found through Frappe's `redis_queue_sentinel_*` keys, and
instead of the Redis restart the master is SIGKILLed --failovers times (default 2), spread over
the run; the sentinels promote the replica and the old master comes back as the new replica. A
fire or claim the replica had not received when its master died is planned again, with the same
job id: it shows as a duplicate if it was also on the queue the replica holds, as missing if the
new leader did not fire it.

    scripts/benchmark chaos [--minutes 10] [--seed N] [--corrupt-every 20] [--sentinel [--failovers 2]]
"""

from __future__ import annotations

import argparse
import json
import math
import random
import signal
import sys
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks import common  # noqa: E402
from benchmarks.observe import parse_time  # noqa: E402
from benchmarks.peers import new_log_dir  # noqa: E402
from btu.scheduler_daemon.store.jobs import parse_job_id  # noqa: E402
from btu.shared import protocol  # noqa: E402
from tests.reliability.test_corrupt_state import CASES  # noqa: E402
from tests.support.keys import KEYS
from tests.support.sentinel import SERVICE, SentinelTopology  # noqa: E402
from tests.support.tcp_proxy import TcpProxy  # noqa: E402

SCHEDULES = 200
VICTIMS = 10  # TS-000001 ... TS-000010 take the schedule-level faults; the rest are the healthy ones
FAULTS = [name for name, case in CASES.items() if not case.deletes_fires]
DB_OUTAGE_SECS = 30
AFTER_FAILURE_SECS = 15


def leader_pid(r) -> int | None:
	try:
		value = r.get(KEYS.leader)
	except Exception:
		return None
	epoch, _, holder = (value or b"").decode(errors="replace").partition("|")
	try:
		return int(holder.split(":")[1])
	except (IndexError, ValueError):  # none, or a lease the corrupt-state fault wrote
		return None


def slot_of(job_id: str) -> tuple[str, float]:
	"""(schedule, slot epoch) from BTU's deterministic job id."""
	_, schedule, slot = parse_job_id(job_id)
	return schedule, slot.timestamp()


class PlainRedis:
	"""One Redis with an append-only file (fsync always); its fault: a restart at a third of the run."""

	scheduler_url_is_own = True

	def __init__(self):
		self.server = common.RedisServer(persistent=True).start()
		self.url = self.server.url

	def client(self):
		return self.server.client(socket_timeout=5)

	def configure(self, bench) -> None:
		pass

	def faults(self, start: float, end: float) -> list[tuple[float, str, object]]:
		return [(start + (end - start) / 3, "redis_restart", lambda: self.server.restart(down_for=3))]

	def close(self) -> None:
		self.server.close()


class SentinelRedis:
	"""A master, a replica and three sentinels; its faults: the master SIGKILLed `failovers` times."""

	scheduler_url_is_own = False  # the scheduler finds the master through the bench's Sentinel keys

	def __init__(self, failovers: int):
		# Not 1 s as in the tests: a loaded two-core machine can leave a healthy master unanswered that long.
		self.topology = SentinelTopology(down_after_ms=3000).start()
		self.url = f"redis://127.0.0.1:{self.topology.ports['a']}/0"
		self.failovers = failovers

	def client(self):
		from redis.sentinel import Sentinel

		return Sentinel(self.topology.sentinel_addresses(), socket_timeout=5).master_for(SERVICE, socket_timeout=5)

	def configure(self, bench) -> None:
		common_config = Path(bench.path) / "sites" / "common_site_config.json"
		common_config.write_text(
			json.dumps({**json.loads(common_config.read_text()), **self.topology.common_config()}, indent=1)
		)

	def faults(self, start: float, end: float) -> list[tuple[float, str, object]]:
		return [
			(start + (k - 0.5) * (end - start) / self.failovers, "master_failover", self.failover)
			for k in range(1, self.failovers + 1)
		]

	def failover(self) -> dict:
		old = self.topology.kill_master()
		promotion = self.topology.wait_for_promotion(old)
		self.topology.restart(old)
		return {"promotion_s": round(promotion, 2)}

	def close(self) -> None:
		self.topology.close()


def released_twice(log_dir: Path) -> int:
	"""Job ids that `fire` log lines name more than once across every scheduler: slots Redis forgot it had
	released (a failover to a replica without those writes) and that were released again. The queue the
	last master holds shows each once; a worker would have been given each twice (the task runner's slot
	claim refuses the second; the rq executor runs it)."""
	counts: dict[str, int] = {}
	for path in log_dir.glob("scheduler-*.log"):
		for line in path.read_text(errors="replace").splitlines():
			if " INFO fire " in line and "job_id=" in line:
				job_id = line.rsplit("job_id=", 1)[1].split(" ", 1)[0]
				counts[job_id] = counts.get(job_id, 0) + 1
	return sum(1 for count in counts.values() if count > 1)


def main() -> None:
	parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
	parser.add_argument("--minutes", type=float, default=10)
	parser.add_argument("--seed", type=int, default=None)
	parser.add_argument("--corrupt-every", type=float, default=20, help="seconds between state corruptions (0: none)")
	parser.add_argument(
		"--sentinel", action="store_true", help="a Sentinel topology; master failovers instead of the Redis restart"
	)
	parser.add_argument(
		"--failovers", type=int, default=2, help="with --sentinel: master SIGKILLs over the run (default 2)"
	)
	args = parser.parse_args()
	rng = random.Random(args.seed)
	log_dir = new_log_dir("chaos")
	server = SentinelRedis(args.failovers) if args.sentinel else PlainRedis()
	proxy = TcpProxy("127.0.0.1", 3306)
	proxy.up()
	bench = common.DevBench(server.url, db_host="127.0.0.1", db_port=proxy.port)
	server.configure(bench)
	bench.insert_schedules(
		[
			{
				"run_frequency": "Cron Style",
				"cron_string": "* * * * * *",
				"catch_up_policy": "fire_all",
				"catch_up_max": 1000,
				"catch_up_window": 86400,
			}
			for _ in range(SCHEDULES)
		]
	)
	r = server.client()
	schedulers: list = []
	serial = 0

	def spawn():
		nonlocal serial
		serial += 1
		url = server.url if server.scheduler_url_is_own else None
		schedulers.append(
			common.start_scheduler(
				bench, url, "rq", ["--log-level", "INFO"], log=open(log_dir / f"scheduler-{serial}.log", "w")
			)
		)

	events: list[dict] = []
	try:
		for _ in range(3):
			spawn()
		common.wait_for_schedules(r, SCHEDULES)
		start = math.ceil(time.time()) + 1
		end = start + args.minutes * 60
		redis_faults = server.faults(start, end)
		db_at = start + 2 * (end - start) / 3
		db_done = False
		next_kill = time.time() + rng.uniform(2, 10)
		next_corrupt = time.time() + args.corrupt_every if args.corrupt_every else math.inf
		while time.time() < end:
			now = time.time()
			if redis_faults and now >= redis_faults[0][0]:
				_, name, fault = redis_faults.pop(0)
				event = {"event": name, "at": time.time()}
				events.append(event)
				event.update(fault() or {})
				continue
			if not db_done and now >= db_at:
				events.append({"event": f"database_unreachable_{DB_OUTAGE_SECS}s", "at": time.time()})
				proxy.down()
				db_done = True
				threading.Timer(DB_OUTAGE_SECS, proxy.up).start()
			if now >= next_corrupt:
				fault = rng.choice(FAULTS)
				victim = f"TS-{rng.randint(1, VICTIMS):06d}"
				try:
					CASES[fault].inject(r, common.SITE, victim)
					events.append({"event": f"corrupt: {fault}", "at": time.time(), "victim": victim})
				except Exception as exc:  # Redis restarting: the next one comes
					events.append({"event": f"corrupt: {fault} (not done: {exc})", "at": time.time()})
				next_corrupt = time.time() + args.corrupt_every
			if now >= next_kill:
				pid = leader_pid(r)
				victim = next((p for p in schedulers if p.pid == pid and p.poll() is None), None)
				if victim:
					victim.send_signal(signal.SIGKILL)
					victim.wait()
					schedulers.remove(victim)
					events.append({"event": "leader_sigkill", "at": time.time(), "pid": pid})
					spawn()
				next_kill = time.time() + rng.uniform(2, 10)
			time.sleep(0.05)
		time.sleep(8)  # the last slots of the window are fired after at most a failover
	finally:
		for p in schedulers:
			common.stop(p)
	try:
		ids = [i.decode() for i in r.lrange(bench.queue, 0, -1)]
		counts: dict[str, int] = {}
		for job_id in ids:
			counts[job_id] = counts.get(job_id, 0) + 1
		duplicates = sum(c - 1 for c in counts.values() if c > 1)
		names = [f"TS-{n:06d}" for n in range(VICTIMS + 1 if args.corrupt_every else 1, SCHEDULES + 1)]
		fired: dict[str, set[float]] = {}
		lags: list[tuple[float, float]] = []
		unique = list(counts)
		with r.pipeline(transaction=False) as pipe:
			for job_id in unique:
				pipe.hget(f"rq:job:{job_id}", "enqueued_at")
			enqueued = pipe.execute()
		healthy = set(names)
		for job_id, at in zip(unique, enqueued):
			schedule, slot = slot_of(job_id)
			fired.setdefault(schedule, set()).add(slot)
			if at and schedule in healthy:  # a victim waits for its rebuild: its lag is not a healthy schedule's
				lags.append((slot, (parse_time(at) - slot) * 1000))
		expected = list(range(int(start), int(end)))
		missing = [(name, s) for name in names for s in expected if float(s) not in fired.get(name, set())]
		for event in events:
			window = [lag for slot, lag in lags if event["at"] - 1 <= slot <= event["at"] + AFTER_FAILURE_SECS]
			event["worst_lag_ms"] = max(window) if window else None
			event["offset_s"] = round(event["at"] - start, 1)
		all_lags = [lag for _, lag in lags]
		result = {
			"minutes": args.minutes,
			"schedules": SCHEDULES,
			"fires_per_s": SCHEDULES,
			"seed": args.seed,
			"window_slots": len(expected) * len(names),
			"jobs": len(ids),
			"duplicates": duplicates,
			"missing": len(missing),
			"missing_sample": missing[:20],
			"lag": common.lag_summary(all_lags),
			"events": events,
			"kills": sum(1 for e in events if e["event"] == "leader_sigkill"),
			"corruptions": sum(1 for e in events if e["event"].startswith("corrupt: ")),
			"healthy_schedules": len(names),
			"released_twice": released_twice(log_dir),
		}
	finally:
		bench.close()
		proxy.down()
		server.close()
	summary = common.table(
		[
			"minutes",
			"fires/s",
			"healthy slots",
			"jobs",
			"leader kills",
			"corruptions",
			"duplicates",
			"missing",
			"released twice",
			"lag p50 ms",
			"lag p99 ms",
			"lag max ms",
		],
		[
			[
				result["minutes"],
				SCHEDULES,
				result["window_slots"],
				result["jobs"],
				result["kills"],
				result["corruptions"],
				result["duplicates"],
				result["missing"],
				result["released_twice"],
				result["lag"]["p50_ms"],
				result["lag"]["p99_ms"],
				result["lag"]["max_ms"],
			]
		],
	)
	per_event = common.table(
		["t (s)", "event", "worst lag in the next 15 s (ms)", "promotion (s)"],
		[[e["offset_s"], e["event"], e["worst_lag_ms"], e.get("promotion_s", "")] for e in events],
	)
	print(summary + "\n\n" + per_event)
	path = common.write_result(
		"chaos_sentinel" if args.sentinel else "chaos",
		{"args": vars(args), **result, "table": summary + "\n\n" + per_event},
	)
	print(f"\nwrote {path} (scheduler logs in {log_dir})")
	if result["duplicates"] or result["missing"]:
		sys.exit(1)


if __name__ == "__main__":
	main()
