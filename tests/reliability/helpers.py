"""What the reliability tests share on top of tests/engine/helpers.py."""

from __future__ import annotations

from btu.scheduler_daemon.store.jobs import parse_job_id
from tests.engine.helpers import queue_ids, queue_key


def site_job_ids(r, bench, site: str, *queue_types: str) -> list[str]:
	"""The site's job ids on the bench's queues (default: "default"); no worker takes them in these tests."""
	ids = [i for queue in (queue_types or ("default",)) for i in queue_ids(r, queue_key(bench, queue))]
	return [i for i in ids if parse_job_id(i)[0] == site]
