"""Task outcomes as Prometheus metrics: what each finished run adds to Redis, and a collector that reads it back.

Every worker process runs tasks and restarts at will, so no process can hold the counts: each finished
run adds its outcome to one hash per site (`Keys.task_outcomes_key`) on the queue Redis, in one
MULTI/EXEC (`record`), and `TaskOutcomes`, a prometheus_client collector, turns that hash into metric
families at scrape time. Its sibling `metrics` does both on a site; this module knows no Frappe.

A field name is a JSON array, ["runs", task, status] or ["duration_bucket", task, "0.5"]: task names are
user data and may hold any character. Counts and sums (in microseconds) are integers, so HINCRBY adds
them exactly. A field this module did not write, or a value that is not what it wrote, is skipped and
counted in btu_task_outcomes_unreadable_fields; a scrape never fails for it.
"""

from __future__ import annotations

import json
import logging
import math
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

from btu.shared.keys import Keys
from btu.shared.protocol import is_utf8
from btu.shared.redis_urls import mask_url

# A BTU Task Log's final statuses -> the status label. Any other status is "other": the series stay bounded.
STATUSES = {"Succeeded": "succeeded", "Failed": "failed", "Timed Out": "timed_out", "Skipped": "skipped"}
OTHER = "other"
STATUS_LABELS = frozenset([*STATUSES.values(), OTHER])
# What Redis's HINCRBY can hold.
MAX_COUNT = 2**63 - 1


@dataclass(frozen=True)
class Histogram:
	"""One histogram per task: fields "<kind>_count", "<kind>_sum_us" and "<kind>_bucket" (per upper bound, not
	cumulative)."""

	kind: str
	metric: str
	help: str
	bounds: tuple[float, ...]

	@property
	def les(self) -> tuple[str, ...]:
		return tuple(map(le_text, self.bounds))

	def observe(self, pipe, key: str, task: str, seconds: float) -> None:
		# A negative lag is clock skew between hosts: counted as no lag, so the sum never goes down.
		seconds = max(0.0, float(seconds))
		pipe.hincrby(key, field_name(f"{self.kind}_count", task), 1)
		pipe.hincrby(key, field_name(f"{self.kind}_sum_us", task), round(seconds * 1_000_000))
		for bound, le in zip(self.bounds, self.les):
			if seconds <= bound:
				pipe.hincrby(key, field_name(f"{self.kind}_bucket", task, le), 1)
				break


def le_text(bound: float) -> str:
	"""A bucket's upper bound as Prometheus writes it (prometheus_client's floatToGoString, which is repr for a finite
	bound under 1e6, as every bound here is). Written here: `record` runs at every run's end, in a work-horse that would
	otherwise import prometheus_client for it; the collector alone needs that library."""
	if not (0 <= bound < 1e6) or math.isnan(bound):
		raise ValueError(f"bucket bound {bound!r}: BTU writes bounds from 0 up to 1e6 only")
	return repr(float(bound))


DURATION = Histogram(
	"duration",
	"btu_task_duration_seconds",
	"How long runs of a BTU Task took (Succeeded, Failed, Timed Out in the runner).",
	(0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600, 1800, 3600),
)
START_LAG = Histogram(
	"start_lag",
	"btu_task_start_lag_seconds",
	"From a run's moment (its slot's fire time, or its request's run_at) to its function's call in a worker.",
	(0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300),
)
HISTOGRAMS = {h.kind: h for h in (DURATION, START_LAG)}
# A histogram's field kinds -> (histogram, part).
HISTOGRAM_FIELDS = {
	f"{h.kind}_{part}": (h, part) for h in HISTOGRAMS.values() for part in ("count", "sum_us", "bucket")
}


def field_name(kind: str, task: str, qualifier: str | None = None) -> str:
	parts = [kind, task] if qualifier is None else [kind, task, qualifier]
	# JSON escapes every character a name may hold; ensure_ascii keeps the field plain ASCII.
	return json.dumps(parts, separators=(",", ":"))


def record(
	pipe, keys: Keys, site: str, task: str, status: str, duration_s: float | None, start_lag_s: float | None, now: float
) -> None:
	"""Queue one finished run's writes on `pipe` (the caller executes it): its count and last-finished time per
	status, its duration and start lag (None: not measured) into the task's histograms."""
	key = keys.task_outcomes_key(site)
	label = STATUSES.get(status, OTHER)
	pipe.hincrby(key, field_name("runs", task, label), 1)
	pipe.hset(key, field_name("last", task, label), repr(float(now)))
	for histogram, seconds in ((DURATION, duration_s), (START_LAG, start_lag_s)):
		if seconds is not None:
			histogram.observe(pipe, key, task, seconds)


# -- reading ---------------------------------------------------------------------------


@dataclass
class TaskHistogram:
	count: int = 0
	sum_us: int = 0
	buckets: dict[str, int] = field(default_factory=dict)

	def cumulative(self, les: tuple[str, ...]) -> list[tuple[str, float]]:
		out, total = [], 0
		for le in les:
			total += self.buckets.get(le, 0)
			out.append((le, total))
		# A count below its buckets' sum is a hash edited by hand: +Inf must still hold every bucket.
		return [*out, ("+Inf", max(self.count, total))]


@dataclass
class Outcomes:
	"""What a site's hash holds, as read: runs and last-finished times per (task, status), histograms per task."""

	runs: dict[tuple[str, str], int] = field(default_factory=dict)
	last: dict[tuple[str, str], float] = field(default_factory=dict)
	histograms: dict[str, dict[str, TaskHistogram]] = field(default_factory=lambda: {kind: {} for kind in HISTOGRAMS})
	unreadable: int = 0

	def add(self, raw_field, raw_value, tasks: set[str] | None) -> None:
		"""Take in one field of the hash; one that is not as `record` writes it is counted as unreadable."""
		parts = parse_field(raw_field)
		if parts is None:
			self.unreadable += 1
			return
		kind, task, qualifier = (*parts, None)[:3]
		if tasks is not None and task not in tasks:
			return  # a Task deleted since: its series end with it
		taken = (
			self.take_run(kind, task, qualifier, text(raw_value))
			if kind in ("runs", "last")
			else self.take_histogram(kind, task, qualifier, text(raw_value))
		)
		if not taken:
			self.unreadable += 1

	def take_run(self, kind: str, task: str, status: str | None, value: str | None) -> bool:
		if status is None:
			return False
		key = (task, status if status in STATUS_LABELS else OTHER)
		if kind == "runs":
			number = count(value)
			if number is not None:
				self.runs[key] = self.runs.get(key, 0) + number
			return number is not None
		moment = timestamp(value)
		if moment is not None:
			self.last[key] = max(moment, self.last.get(key, 0.0))
		return moment is not None

	def take_histogram(self, kind: str, task: str, le: str | None, value: str | None) -> bool:
		histogram, part = HISTOGRAM_FIELDS.get(kind, (None, None))
		number = count(value)
		if histogram is None or number is None or (le is not None) != (part == "bucket"):
			return False
		if part == "bucket" and le not in histogram.les:
			return False
		entry = self.histograms[histogram.kind].setdefault(task, TaskHistogram())
		if part == "bucket":
			entry.buckets[le] = number
		else:
			setattr(entry, part, number)
		return True


def read(redis_conn, keys: Keys, site: str, tasks: set[str] | None = None) -> Outcomes:
	"""The site's hash as Outcomes, only `tasks`' (None: every task's). Raises what Redis raises (WRONGTYPE too)."""
	outcomes = Outcomes()
	for raw_field, raw_value in redis_conn.hgetall(keys.task_outcomes_key(site)).items():
		outcomes.add(raw_field, raw_value, tasks)
	return outcomes


def forget(redis_conn, keys: Keys, site: str, task: str) -> int:
	"""Remove every field of `task` from the site's hash (its Task was deleted); returns how many went.

	One HKEYS (about 49 fields per Task on the site) and one HDEL: commands the bench's queue user
	holds (btu.scheduler_daemon.operations.redis_acl). A field is the task's when it parses as `record` writes
	it and names that task exactly, so "BTU-1" takes nothing of "BTU-10".
	"""
	key = keys.task_outcomes_key(site)
	fields = [raw for raw in redis_conn.hkeys(key) if (parse_field(raw) or ["", None])[1] == task]
	if fields:
		redis_conn.hdel(key, *fields)
	return len(fields)


def text(value) -> str | None:
	if isinstance(value, bytes):
		try:
			return value.decode("utf-8")
		except UnicodeDecodeError:
			return None
	return value if isinstance(value, str) else None


def parse_field(raw) -> list[str] | None:
	"""[kind, task] or [kind, task, qualifier], all strings, or None."""
	try:
		parts = json.loads(text(raw) or "")
	except ValueError:
		return None
	# A lone surrogate ("\\ud800" in the JSON) would make the exposition itself fail to encode.
	if isinstance(parts, list) and len(parts) in (2, 3) and all(isinstance(p, str) and is_utf8(p) for p in parts):
		return parts
	return None


def count(value: str | None) -> int | None:
	"""A count or sum as HINCRBY leaves it: a plain decimal integer from 0 to MAX_COUNT."""
	if value is None or not value.isascii() or not value.isdigit() or len(value) > 19:
		return None
	number = int(value)
	return number if number <= MAX_COUNT else None


def timestamp(value: str | None) -> float | None:
	try:
		moment = float(value)
	except (TypeError, ValueError):
		return None
	return moment if math.isfinite(moment) and moment >= 0 else None


# -- the collector ------------------------------------------------------------------------


class TaskOutcomes:
	"""A prometheus_client collector of one site's task outcomes, read from Redis at each scrape.

	`connect()` gives the Redis client. It or the read failing (Redis down, the key of another type)
	is logged and shown as btu_task_outcomes_up 0, never raised: the scrape still answers.
	"""

	def __init__(
		self,
		connect: Callable[[], object],
		keys: Keys,
		site: str,
		tasks: set[str] | None = None,
		logger: logging.Logger | None = None,
	):
		self.connect = connect
		self.keys = keys
		self.site = site
		self.tasks = tasks
		self.logger = logger or logging.getLogger("btu")

	def collect(self) -> Iterable:
		try:
			outcomes, readable = read(self.connect(), self.keys, self.site, self.tasks), 1
		except Exception as exc:
			key = self.keys.task_outcomes_key(self.site)
			fix = (
				"; it holds no hash: delete it (redis-cli del), the next run writes a new one"
				if "WRONGTYPE" in str(exc)
				else ""
			)
			self.logger.warning(
				f"site={self.site} task outcomes not read from {key}: {type(exc).__name__}: {mask_url(str(exc))}{fix}"
			)
			outcomes, readable = Outcomes(), 0
		return families(self.site, outcomes, readable)


def families(site: str, outcomes: Outcomes, readable: int) -> list:
	from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, HistogramMetricFamily

	runs = CounterMetricFamily(
		"btu_task_runs", "Finished runs of a BTU Task, by final status.", labels=["site", "task", "status"]
	)
	for (task, status), number in sorted(outcomes.runs.items()):
		runs.add_metric([site, task, status], number)
	last = GaugeMetricFamily(
		"btu_task_last_finished_timestamp_seconds",
		"When a run of a BTU Task last finished with this status (Unix time).",
		labels=["site", "task", "status"],
	)
	for (task, status), moment in sorted(outcomes.last.items()):
		last.add_metric([site, task, status], moment)
	found = [runs, last]
	for histogram in HISTOGRAMS.values():
		family = HistogramMetricFamily(histogram.metric, histogram.help, labels=["site", "task"])
		for task, entry in sorted(outcomes.histograms[histogram.kind].items()):
			family.add_metric([site, task], entry.cumulative(histogram.les), entry.sum_us / 1_000_000)
		found.append(family)
	unreadable = GaugeMetricFamily(
		"btu_task_outcomes_unreadable_fields",
		"Fields of the site's task-outcome hash this scrape skipped: not as BTU writes them.",
		labels=["site"],
	)
	unreadable.add_metric([site], outcomes.unreadable)
	state = GaugeMetricFamily(
		"btu_task_outcomes_up",
		"1 when the site's task-outcome hash was read, 0 when it could not be (the scrape still answers).",
		labels=["site"],
	)
	state.add_metric([site], readable)
	return [*found, unreadable, state]
