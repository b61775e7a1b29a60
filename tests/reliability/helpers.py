"""What the reliability tests share on top of tests/engine/helpers.py."""

from __future__ import annotations

from datetime import datetime, timezone

from btu.scheduler_daemon.jobs import job_id
from tests.engine.helpers import queue_ids, queue_key


def job_prefix(site: str) -> str:
	"""How the site's job ids start with the installed rq ("site1.localhost::" on 1.x, "site1-localhost--" on 2.x)."""
	sample = job_id(site, "S", datetime(2000, 1, 1, tzinfo=timezone.utc))
	return sample[: sample.rindex("btu")]


def site_job_ids(r, bench, site: str, *queue_types: str) -> list[str]:
	"""The site's job ids on the bench's queues (default: "default"); no worker takes them in these tests."""
	prefix = job_prefix(site)
	ids = [i for queue in (queue_types or ("default",)) for i in queue_ids(r, queue_key(bench, queue))]
	return [i for i in ids if i.startswith(prefix)]
