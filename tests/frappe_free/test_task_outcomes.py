"""Task outcomes on a real Redis: recorded as the task runner does, scraped through prometheus_client, parsed by its
parser."""

from __future__ import annotations

import logging
import random
import threading
import uuid

import pytest
import redis
from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.parser import text_string_to_metric_families

from btu.btu_core.insights import task_outcomes
from btu.btu_core.insights.task_outcomes import DURATION, START_LAG, TaskOutcomes, field_name, record
from btu.shared import protocol
from tests.support.keys import KEYS

pytestmark = pytest.mark.versions

NOW = 1_780_000_000.25


@pytest.fixture
def site():
	return f"outcomes-{uuid.uuid4().hex[:8]}.test"


def add(r, site, task, status="Succeeded", duration=None, lag=None, now=NOW):
	"""One run, in one MULTI/EXEC as the task runner sends it."""
	with r.pipeline(transaction=True) as pipe:
		record(pipe, KEYS, site, task, status, duration, lag, now)
		pipe.execute()


def scrape(r, site, tasks=None, logger=None) -> tuple[str, dict]:
	"""The exposition text, and its samples parsed back: (name, sorted labels) -> value."""
	registry = CollectorRegistry()
	registry.register(TaskOutcomes(lambda: r, KEYS, site, tasks, logger))
	body = generate_latest(registry).decode()
	samples = {}
	for family in text_string_to_metric_families(body):
		for sample in family.samples:
			key = (sample.name, tuple(sorted(sample.labels.items())))
			assert key not in samples, f"sample twice: {key}"
			samples[key] = sample.value
	return body, samples


def value(samples, name, **labels):
	return samples.get((name, tuple(sorted(labels.items()))))


def series(samples, name):
	return {labels: v for (n, labels), v in samples.items() if n == name}


def expected_buckets(histogram, observations):
	"""Cumulative buckets as Prometheus defines them: how many observations are <= each bound."""
	clamped = [max(0.0, o) for o in observations]
	return {le: sum(1 for o in clamped if o <= bound) for bound, le in zip(histogram.bounds, histogram.les)} | {
		"+Inf": len(clamped)
	}


def test_counts_sums_and_buckets_are_exact(r, site):
	rng = random.Random(17)
	tasks = ["BTU-00001", "BTU-00002", "BTU-00003"]
	# Every bound exactly, just above it, and beyond the last one.
	edges = [b for b in DURATION.bounds] + [b + 1e-6 for b in DURATION.bounds] + [7200.5, 0.0]
	runs, last, durations, lags = {}, {}, {t: [] for t in tasks}, {t: [] for t in tasks}
	for i in range(600):
		task = tasks[i % 3]
		status = rng.choice(["Succeeded", "Failed", "Timed Out", "Skipped"])
		duration = (
			None if status == "Skipped" else (edges[i % len(edges)] if i < 200 else round(rng.uniform(0, 4000), 6))
		)
		lag = (
			None
			if status == "Skipped" or i % 5 == 0
			else round(rng.choice([rng.uniform(0, 0.02), rng.uniform(0, 400), 0.001]), 6)
		)
		add(r, site, task, status, duration, lag, now=NOW + i)
		label = task_outcomes.STATUSES[status]
		runs[(task, label)] = runs.get((task, label), 0) + 1
		last[(task, label)] = NOW + i
		if duration is not None:
			durations[task].append(duration)
		if lag is not None:
			lags[task].append(lag)

	_, samples = scrape(r, site)

	assert {(dict(l)["task"], dict(l)["status"]): v for l, v in series(samples, "btu_task_runs_total").items()} == runs
	for task in tasks:
		for histogram, observed in ((DURATION, durations[task]), (START_LAG, lags[task])):
			got = {
				dict(l)["le"]: v
				for l, v in series(samples, f"{histogram.metric}_bucket").items()
				if dict(l)["task"] == task
			}
			assert got == expected_buckets(histogram, observed), (histogram.metric, task)
			assert value(samples, f"{histogram.metric}_count", site=site, task=task) == len(observed)
			assert (
				value(samples, f"{histogram.metric}_sum", site=site, task=task)
				== sum(round(o * 1e6) for o in observed) / 1e6
			)
	# The last run of each (task, status) finished at NOW + its index.
	assert {
		(dict(l)["task"], dict(l)["status"]): v
		for l, v in series(samples, "btu_task_last_finished_timestamp_seconds").items()
	} == last
	assert value(samples, "btu_task_outcomes_unreadable_fields", site=site) == 0
	assert value(samples, "btu_task_outcomes_up", site=site) == 1


def test_concurrent_workers_lose_no_count(redis_server, r, site):
	"""Many processes record at once (every worker runs tasks): HINCRBY inside MULTI adds exactly."""
	per_thread, threads = 150, 8

	def work():
		client = redis_server.client()
		for i in range(per_thread):
			add(client, site, "BTU-00001", "Succeeded" if i % 2 else "Failed", 0.5, 0.002)
		client.close()

	workers = [threading.Thread(target=work) for _ in range(threads)]
	for worker in workers:
		worker.start()
	for worker in workers:
		worker.join()
	_, samples = scrape(r, site)
	total = per_thread * threads
	assert value(samples, "btu_task_runs_total", site=site, task="BTU-00001", status="succeeded") == total / 2
	assert value(samples, "btu_task_runs_total", site=site, task="BTU-00001", status="failed") == total / 2
	assert value(samples, "btu_task_duration_seconds_bucket", site=site, task="BTU-00001", le="0.5") == total
	assert value(samples, "btu_task_duration_seconds_sum", site=site, task="BTU-00001") == total * 0.5
	assert value(samples, "btu_task_start_lag_seconds_bucket", site=site, task="BTU-00001", le="0.001") == 0
	assert value(samples, "btu_task_start_lag_seconds_bucket", site=site, task="BTU-00001", le="0.0025") == total


HOSTILE = [
	'quote " in it',
	"new\nline",
	"back\\slash\\n not a newline",
	"pipe|colon:brace{}=,",
	'"],["runs","x","failed"',
	"",
	"émoji 🚀 ünïcödé",
	"tab\tand\r\ncarriage",
	'le="0.5"} 99',
]


def test_hostile_task_names_round_trip_as_labels(r, site):
	for i, task in enumerate(HOSTILE):
		for _ in range(i + 1):
			add(r, site, task, "Succeeded", 0.2, 0.003)
	add(r, site, "ok", "Failed")
	body, samples = scrape(r, site)
	runs = {
		dict(l)["task"]: v
		for l, v in series(samples, "btu_task_runs_total").items()
		if dict(l)["status"] == "succeeded"
	}
	assert runs == {task: i + 1 for i, task in enumerate(HOSTILE)}
	for i, task in enumerate(HOSTILE):
		assert value(samples, "btu_task_duration_seconds_count", site=site, task=task) == i + 1
		assert value(samples, "btu_task_start_lag_seconds_bucket", site=site, task=task, le="0.005") == i + 1
	# The name that looks like another field is one task of its own: "x" has no series.
	assert value(samples, "btu_task_runs_total", site=site, task="x", status="failed") is None
	assert value(samples, "btu_task_runs_total", site=site, task="ok", status="failed") == 1
	# Each sample is one line: no raw "\n" got into a label (the text format splits lines on it alone; "\r" may stay
	# raw).
	assert all(line.startswith(("#", "btu_")) for line in body.rstrip("\n").split("\n"))


def test_a_hostile_site_name_is_a_label_too(r):
	site = 'we"ird\nsite\\'
	add(r, site, "BTU-1", "Succeeded", 1.0)
	_, samples = scrape(r, site)
	assert value(samples, "btu_task_runs_total", site=site, task="BTU-1", status="succeeded") == 1


def test_statuses_outside_the_known_set_are_clamped_to_other(r, site):
	for status in ["Started", "Cancelled", "succeeded", "weird\nstatus", *(f"junk-{i}" for i in range(300))]:
		add(r, site, "BTU-1", status, 0.1)
	# Fields written by another hand with statuses this code never writes.
	r.hset(
		KEYS.task_outcomes_key(site),
		mapping={field_name("runs", "BTU-1", "exploded"): 7, field_name("last", "BTU-1", "nope"): NOW + 50},
	)
	_, samples = scrape(r, site)
	assert series(samples, "btu_task_runs_total") == {(("site", site), ("status", "other"), ("task", "BTU-1")): 304 + 7}
	assert (
		value(samples, "btu_task_last_finished_timestamp_seconds", site=site, task="BTU-1", status="other") == NOW + 50
	)
	# Bounded in Redis too: 304 odd statuses made runs and last once ("other"), the histogram 3, the hand 2.
	assert r.hlen(KEYS.task_outcomes_key(site)) == 2 + 3 + 2


def test_negative_start_lag_counts_as_none(r, site):
	"""Clock skew between hosts: a worker that starts "before" its slot must not make the sum go down."""
	add(r, site, "BTU-1", "Succeeded", 0.1, -3.5)
	_, samples = scrape(r, site)
	assert value(samples, "btu_task_start_lag_seconds_sum", site=site, task="BTU-1") == 0
	assert value(samples, "btu_task_start_lag_seconds_bucket", site=site, task="BTU-1", le="0.001") == 1


def test_only_the_tasks_given_are_exported(r, site):
	for task in ("BTU-1", "BTU-2", "deleted"):
		add(r, site, task, "Succeeded", 0.1, 0.1)
	_, samples = scrape(r, site, tasks={"BTU-1", "BTU-2"})
	assert {dict(l)["task"] for l in series(samples, "btu_task_runs_total")} == {"BTU-1", "BTU-2"}
	assert {dict(l)["task"] for l in series(samples, "btu_task_duration_seconds_count")} == {"BTU-1", "BTU-2"}
	assert value(samples, "btu_task_outcomes_unreadable_fields", site=site) == 0


CORRUPT = {
	# text, negatives, floats, huge numbers where a count belongs
	field_name("runs", "BTU-1", "failed"): "many",
	field_name("runs", "BTU-1", "skipped"): "-3",
	field_name("runs", "BTU-1", "timed_out"): "2.5",
	field_name("runs", "BTU-2", "failed"): "9" * 30,
	field_name("runs", "BTU-2", "skipped"): str(2**63),
	field_name("runs", "BTU-2", "timed_out"): " 4",
	field_name("runs", "BTU-3", "failed"): "١٢",  # Arabic-Indic digits: isdigit() says yes
	field_name("duration_sum_us", "BTU-2"): "1e400",
	field_name("duration_count", "BTU-2"): "",
	# timestamps that are not
	field_name("last", "BTU-1", "failed"): "inf",
	field_name("last", "BTU-1", "skipped"): "nan",
	field_name("last", "BTU-1", "timed_out"): "-1",
	field_name("last", "BTU-2", "failed"): "1e400",
	field_name("last", "BTU-2", "skipped"): "yesterday",
	# fields this code never writes
	"runs|BTU-1|failed": "1",
	"not json": "1",
	"[1, 2]": "1",
	'{"runs": 1}': "1",
	'["runs"]': "1",
	'["runs","BTU-1","failed","extra"]': "1",
	'["runs","BTU-1"]': "1",
	'["runs","\\ud800","failed"]': "1",
	field_name("bogus", "BTU-1"): "1",
	field_name("duration_bucket", "BTU-1", "0.3"): "1",
	field_name("duration_bucket", "BTU-1"): "1",
	field_name("duration_count", "BTU-1", "0.5"): "1",
	field_name("start_lag_sum", "BTU-1"): "1",
	field_name("_count", "BTU-1"): "1",
}


def test_corrupt_fields_are_skipped_and_counted_never_breaking_the_scrape(r, site):
	add(r, site, "BTU-1", "Succeeded", 0.2, 0.01)
	add(r, site, "BTU-2", "Succeeded", 0.2, 0.01)
	key = KEYS.task_outcomes_key(site)
	r.hset(key, mapping=CORRUPT)
	r.hset(key, b"\xff\xfe not utf-8", b"1")
	r.hset(key, field_name("runs", "BTU-3", "succeeded"), b"\xff")
	_, samples = scrape(r, site)
	assert value(samples, "btu_task_outcomes_unreadable_fields", site=site) == len(CORRUPT) + 2
	assert value(samples, "btu_task_outcomes_up", site=site) == 1
	assert series(samples, "btu_task_runs_total") == {
		(("site", site), ("status", "succeeded"), ("task", "BTU-1")): 1,
		(("site", site), ("status", "succeeded"), ("task", "BTU-2")): 1,
	}
	assert value(samples, "btu_task_duration_seconds_count", site=site, task="BTU-1") == 1
	# BTU-2's sum and count were overwritten with junk: the bucket still makes a valid histogram.
	assert value(samples, "btu_task_duration_seconds_sum", site=site, task="BTU-2") == 0
	assert value(samples, "btu_task_duration_seconds_count", site=site, task="BTU-2") == 1
	assert value(samples, "btu_task_duration_seconds_bucket", site=site, task="BTU-2", le="0.25") == 1
	assert value(samples, "btu_task_start_lag_seconds_sum", site=site, task="BTU-2") == 0.01
	assert {dict(l)["status"] for l in series(samples, "btu_task_last_finished_timestamp_seconds")} == {"succeeded"}


def test_a_count_below_its_buckets_still_makes_a_valid_histogram(r, site):
	add(r, site, "BTU-1", "Succeeded", 0.2)
	add(r, site, "BTU-1", "Succeeded", 0.3)
	r.hset(KEYS.task_outcomes_key(site), field_name("duration_count", "BTU-1"), 1)
	_, samples = scrape(r, site)
	assert value(samples, "btu_task_duration_seconds_bucket", site=site, task="BTU-1", le="+Inf") == 2
	assert value(samples, "btu_task_duration_seconds_count", site=site, task="BTU-1") == 2


def test_a_key_of_another_type_or_redis_down_is_up_zero_and_logged(r, site, caplog):
	r.set(KEYS.task_outcomes_key(site), "not a hash")
	with caplog.at_level(logging.WARNING, logger="btu"):
		body, samples = scrape(r, site)
	assert value(samples, "btu_task_outcomes_up", site=site) == 0
	assert series(samples, "btu_task_runs_total") == {}
	assert "WRONGTYPE" in caplog.text and "delete it" in caplog.text and KEYS.task_outcomes_key(site) in caplog.text

	# Recording into it fails in Redis (the Frappe side logs that and goes on); it changes nothing.
	with pytest.raises(redis.ResponseError):
		add(r, site, "BTU-1")
	assert r.get(KEYS.task_outcomes_key(site)) == b"not a hash"

	caplog.clear()
	down = redis.Redis(host="127.0.0.1", port=1, socket_connect_timeout=0.5, password="s3cret")
	with caplog.at_level(logging.WARNING, logger="btu"):
		_, samples = scrape(down, site)
	assert value(samples, "btu_task_outcomes_up", site=site) == 0
	assert "ConnectionError" in caplog.text

	def refuse():
		raise redis.ConnectionError("Error connecting to redis://user:s3cret@10.0.0.9:6379")

	caplog.clear()
	registry = CollectorRegistry()
	registry.register(TaskOutcomes(refuse, KEYS, site))
	with caplog.at_level(logging.WARNING, logger="btu"):
		samples = {
			s.name: s.value
			for f in text_string_to_metric_families(generate_latest(registry).decode())
			for s in f.samples
		}
	assert samples["btu_task_outcomes_up"] == 0
	assert "s3cret" not in caplog.text and "***" in caplog.text


def test_recording_needs_only_the_grants_btu_gives_the_bench_user(redis_server, r, site):
	"""The Frappe side records, scrapes and forgets a deleted Task as the bench's rq user: with only BTU's grants
	(no HINCRBYFLOAT, no HSCAN), it works."""
	from btu.scheduler_daemon.operations import redis_acl

	user, password = f"outcomes-{uuid.uuid4().hex[:6]}", "pw"
	r.acl_setuser(user, enabled=True, passwords=[f"+{password}"], commands=["-@all"])
	r.execute_command("ACL", "SETUSER", user, *redis_acl.rules(KEYS, "bench"))
	try:
		client = redis_server.client(username=user, password=password)
		add(client, site, "BTU-1", "Failed", 1.5, 0.2)
		_, samples = scrape(client, site)
		assert value(samples, "btu_task_runs_total", site=site, task="BTU-1", status="failed") == 1
		assert value(samples, "btu_task_outcomes_up", site=site) == 1
		assert (
			task_outcomes.forget(client, KEYS, site, "BTU-1") == 8
		)  # runs, last, and of both histograms a count, a sum, a bucket
		assert client.hlen(KEYS.task_outcomes_key(site)) == 0
		client.close()
	finally:
		r.acl_deluser(user)


def every_outcome(r, site, task):
	"""Runs of every status, and durations and start lags in every bucket and past the last."""
	for status in [*task_outcomes.STATUSES, "Started"]:
		add(r, site, task, status)
	for bound in [*DURATION.bounds, 7200]:
		add(r, site, task, "Succeeded", duration=bound)
	for bound in [*START_LAG.bounds, 900]:
		add(r, site, task, "Succeeded", lag=bound)


def test_a_task_has_at_most_49_series(r, site):
	"""The README's figure: runs and last finished per 5 statuses, two histograms of (buckets + Inf + sum + count)."""
	every_outcome(r, site, "BTU-1")
	_, samples = scrape(r, site)
	mine = [key for key in samples if ("task", "BTU-1") in key[1]]
	assert len(mine) == 5 + 5 + (len(DURATION.bounds) + 3) + (len(START_LAG.bounds) + 3) == 49


def test_forget_removes_exactly_the_task_s_fields(r, site):
	tasks = ["BTU-1", "BTU-10", "BTU-1 ", 'BTU-1"', *HOSTILE]
	for task in tasks:
		every_outcome(r, site, task)
	key = KEYS.task_outcomes_key(site)
	r.hset(key, mapping={"not json": 1, '["runs","BTU-1"': 2, field_name("runs", "BTU-1", "exploded"): 3})
	for gone in ("BTU-1", *HOSTILE):
		before = r.hgetall(key)
		theirs = {f for f in before if (task_outcomes.parse_field(f) or [None, None])[1] == gone}
		assert len(theirs) >= 44
		assert task_outcomes.forget(r, KEYS, site, gone) == len(theirs)
		assert r.hgetall(key) == {f: v for f, v in before.items() if f not in theirs}
		assert task_outcomes.forget(r, KEYS, site, gone) == 0
	_, samples = scrape(r, site)
	left = {dict(labels)["task"] for labels in series(samples, "btu_task_runs_total")}
	assert left == {"BTU-10", "BTU-1 ", 'BTU-1"'}
	# The junk that names no task stays, counted as before; nothing of another site's hash is touched.
	assert value(samples, "btu_task_outcomes_unreadable_fields", site=site) == 2
	assert task_outcomes.forget(r, KEYS, f"other-{site}", "BTU-10") == 0


def test_the_key_is_outside_the_scheduler_s_state():
	"""The scheduler type-checks, quarantines and purges btu:site:* and SITE_KEY_TEMPLATES' keys: never this one."""
	key = KEYS.task_outcomes_key("a.site")
	assert key == "btu:task_outcomes:a.site"
	assert not any(key.startswith(t.split("{")[0]) for t in KEYS.site_key_templates.values())
	assert key.startswith(KEYS.grant[1:-1])
