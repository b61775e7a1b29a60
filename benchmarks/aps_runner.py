"""APScheduler 3 with a Redis job store, enqueueing `benchmarks.jobs.record` into RQ (run by benchmarks/peers.py)."""

from __future__ import annotations

import argparse
import json
import signal
import sys
import threading
from datetime import datetime, timezone
from pathlib import Path
from urllib.parse import urlsplit

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import redis  # noqa: E402
from apscheduler.executors.pool import ThreadPoolExecutor  # noqa: E402
from apscheduler.jobstores.redis import RedisJobStore  # noqa: E402
from apscheduler.schedulers.background import BackgroundScheduler  # noqa: E402
from apscheduler.triggers.date import DateTrigger  # noqa: E402
from apscheduler.triggers.interval import IntervalTrigger  # noqa: E402
from rq import Queue  # noqa: E402

READY_KEY = "benchmark:ready"
_queue: Queue | None = None


def fire(i: int, url: str, queue: str) -> None:
	"""The APScheduler job: enqueue the benchmark job on RQ, as an APScheduler user enqueues to RQ."""
	global _queue
	if _queue is None:
		_queue = Queue(queue, connection=redis.Redis.from_url(url))
	_queue.enqueue("benchmarks.jobs.record", i=i, result_ttl=600)


def main() -> None:
	parser = argparse.ArgumentParser()
	parser.add_argument("--url", required=True)
	parser.add_argument("--queue", required=True)
	parser.add_argument("--schedules", required=True)
	parser.add_argument("--best", action="store_true")
	args = parser.parse_args()
	parts = urlsplit(args.url)
	store = RedisJobStore(host=parts.hostname, port=parts.port, db=int((parts.path or "/0").strip("/") or 0))
	if args.best:
		scheduler = BackgroundScheduler(
			jobstores={"default": store},
			executors={"default": ThreadPoolExecutor(20)},
			job_defaults={"misfire_grace_time": None, "coalesce": False, "max_instances": 100},
			timezone="UTC",
		)
	else:
		scheduler = BackgroundScheduler(jobstores={"default": store}, timezone="UTC")
	scheduler.start()
	for i, first, period in json.loads(Path(args.schedules).read_text()):
		start = datetime.fromtimestamp(first, timezone.utc)
		trigger = (
			DateTrigger(start) if period is None else IntervalTrigger(seconds=period, start_date=start, timezone="UTC")
		)
		scheduler.add_job(
			fire, trigger, kwargs={"i": i, "url": args.url, "queue": args.queue}, id=f"s{i}", replace_existing=True
		)
	redis.Redis.from_url(args.url).set(READY_KEY, "1")
	stop = threading.Event()
	signal.signal(signal.SIGTERM, lambda *_: stop.set())
	signal.signal(signal.SIGINT, lambda *_: stop.set())
	stop.wait()
	scheduler.shutdown(wait=False)


if __name__ == "__main__":
	main()
