"""Reading fires back from Redis, the same way for every system.

`Observer` pops job ids off a queue as they arrive (no worker), noting when,
and reads each job hash's `enqueued_at`; `worker_records` reads what `benchmarks.jobs.record`
noted when a worker ran the job. `slot_lags` turns fires into lags per slot:
a slot is served by the schedule's first fire at or after it.
"""

from __future__ import annotations

import re
import threading
import time
from bisect import bisect_left
from datetime import datetime, timezone

from benchmarks.jobs import STARTS_KEY
from benchmarks.peers import Schedule

_I = re.compile(r"\bi=(\d+)")
_BTU = re.compile(r"\[\S+ TS-(\d+) ")


def parse_time(value: bytes | str) -> float:
	text = value.decode() if isinstance(value, bytes) else value
	moment = datetime.fromisoformat(text.replace("Z", "+00:00"))
	if moment.tzinfo is None:
		moment = moment.replace(tzinfo=timezone.utc)
	return moment.timestamp()


def schedule_index(description: bytes | str) -> int | None:
	"""The schedule number of a job: `i=<n>` in a peer's call, `TS-<n>` (1-based) in BTU's description."""
	text = description.decode() if isinstance(description, bytes) else description
	found = _BTU.search(text)
	if found:
		return int(found.group(1)) - 1
	found = _I.search(text)
	return int(found.group(1)) if found else None


class Observer:
	"""Pop the jobs of `queue_key` as they arrive, as a worker would, and note each job's schedule with

	- `fires`: its hash's `enqueued_at`, the time the scheduler stamped;
	- `seen`: the local time just after it was popped, so at the latest when a worker could
	  have taken it. A blocking pop wakes as soon as a job is on the queue.
	"""

	def __init__(self, r, queue_key: str):
		self.r = r
		self.queue_key = queue_key
		self.fires: list[tuple[int, float]] = []
		self.seen: list[tuple[int, float]] = []
		self._stop = threading.Event()
		self._thread = threading.Thread(target=self._run, daemon=True)

	def start(self) -> Observer:
		self._thread.start()
		return self

	def stop(self) -> list[tuple[int, float]]:
		self._stop.set()
		self._thread.join()
		self._drain()
		return self.fires

	def _run(self) -> None:
		while not self._stop.is_set():
			first = self.r.blpop([self.queue_key], timeout=0.05)
			if first:
				self._drain(((first[1], time.time()),))

	def _drain(self, popped: tuple[tuple[bytes, float], ...] = ()) -> None:
		popped = list(popped)
		while True:  # everything on the queue first, so reading hashes delays no pop
			more = self.r.lpop(self.queue_key, 2000) or []
			now = time.time()
			popped += [(job_id, now) for job_id in more]
			if len(more) < 2000:
				break
		if not popped:
			return
		ids = [job_id for job_id, _ in popped]
		with self.r.pipeline(transaction=False) as pipe:
			for job_id in ids:
				pipe.hmget(b"rq:job:" + job_id, "enqueued_at", "description")
			rows = pipe.execute()
		for (enqueued_at, description), (_, seen) in zip(rows, popped):
			if enqueued_at and description:
				i = schedule_index(description)
				if i is not None:
					self.fires.append((i, parse_time(enqueued_at)))
					self.seen.append((i, seen))


def collect(r, observer) -> tuple:
	"""(enqueue times, worker start times or None, observer's seen times or None): from the observer when one
	popped the queue, else from the worker's records a second after the run."""
	if observer is not None:
		return observer.stop(), None, observer.seen
	time.sleep(1)
	return (*worker_records(r), None)


def worker_records(r) -> tuple[list[tuple[int, float]], list[tuple[int, float]]]:
	"""(schedule, enqueued_at) and (schedule, started) of every job a worker ran."""
	enqueued, started = [], []
	for raw in r.lrange(STARTS_KEY, 0, -1):
		i, e, s = raw.decode().split()
		enqueued.append((int(i), float(e)))
		started.append((int(i), float(s)))
	return enqueued, started


def slot_lags(schedules: list[Schedule], fires: list[tuple[int, float]], start: float, end: float) -> dict:
	"""Lag (ms) of each slot in [start, end) to the first fire of its schedule at or after it.

	Returns lags, the slot count, unserved slots (no fire after them) and the
	fires from `start` on: fewer fires than slots means the system coalesced or
	dropped slots.
	"""
	by_schedule: dict[int, list[float]] = {}
	for i, t in fires:
		by_schedule.setdefault(i, []).append(t)
	for times in by_schedule.values():
		times.sort()
	lags, slots, unserved = [], 0, 0
	fired = sum(1 for s in schedules for t in by_schedule.get(s.i, []) if t >= start - 0.0005)
	for s in schedules:
		times = by_schedule.get(s.i, [])
		for slot in s.slots(end):
			if slot < start or slot >= end:
				continue
			slots += 1
			k = bisect_left(times, slot - 0.0005)
			if k == len(times):
				unserved += 1
				continue
			lags.append((times[k] - slot) * 1000)
	return {"lags": lags, "slots": slots, "unserved": unserved, "fires": fired}


def anchored_on_first_fire(schedules: list[Schedule], fires: list[tuple[int, float]], start: float) -> list[Schedule]:
	"""For a peer that picks its own first slot (RQ cron): each schedule's slots counted from its first fire at or
	after `start`."""
	first: dict[int, float] = {}
	for i, t in fires:
		if t >= start and (i not in first or t < first[i]):
			first[i] = t
	return [Schedule(s.i, first[s.i], s.period) for s in schedules if s.i in first]
