"""Job ids are injective per (site, schedule, slot) and taken by the installed rq, whichever rq BTU supports.

rq 1.x takes any text, rq 2.0 to 2.7 refuse ":", rq 2.8+ take only
[A-Za-z0-9_-]: look-alike names such as "TS:1" and "TS|1", or sites that
differ only in punctuation, must still get ids of their own, or one of them
is counted as the other's duplicate and never runs.
"""

from __future__ import annotations

import string
from collections import Counter
from datetime import datetime, timedelta, timezone
from itertools import product

import pytest
import redis
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st
from rq.job import Job

from btu.scheduler_daemon.store import jobs
from btu.scheduler_daemon.store.outcomes import JobOutcome
from btu.shared import protocol
from devbench.data import SiteData
from tests.engine.helpers import ONE_SECOND, queue_ids, queue_key, recent_fires, wait_until

pytestmark = pytest.mark.versions

EPOCH = datetime(1970, 1, 1, tzinfo=timezone.utc)
LAST_MS = (datetime(9999, 12, 31, 23, 59, 59, tzinfo=timezone.utc) - EPOCH) // timedelta(milliseconds=1)
LOOK_ALIKE_SITES = [
	"x.y.localhost",
	"x-y.localhost",
	"x_y.localhost",
	"x y.localhost",
	"x%y.localhost",
	"x_2Ey.localhost",
]
LOOK_ALIKE_SCHEDULES = [
	"TS:1",
	"TS|1",
	"TS 1",
	"TS.1",
	"TS-1",
	"TS_1",
	"TS%1",
	"TS%3A1",
	"TS_3A1",
	"TS/1",
	"TS||1",
	"TS::1",
	"TSé1",
]
PUNCTUATION = string.ascii_letters[:6] + string.digits[:3] + string.punctuation + " é中😀"
# Printable as str.isprintable means it (schedule names with control characters are invalid rows).
NOT_PRINTABLE = ("Cc", "Cf", "Cs", "Co", "Cn", "Zl", "Zp", "Zs")

# Site names: no "|" or ":" (bench.py refuses those sites) and no "/" (a directory name).
sites = st.one_of(
	st.text(st.sampled_from(PUNCTUATION.replace("|", "").replace(":", "").replace("/", "")), min_size=1, max_size=40),
	st.text(
		st.characters(exclude_categories=NOT_PRINTABLE, include_characters=" ", exclude_characters="|:/"),
		min_size=1,
		max_size=60,
	),
)
schedules = st.one_of(
	st.text(st.sampled_from(PUNCTUATION), min_size=1, max_size=40),
	st.text(st.characters(exclude_categories=NOT_PRINTABLE, include_characters=" "), min_size=1, max_size=140),
)
slots = st.one_of(
	st.integers(0, LAST_MS // 1000).map(lambda s: s * 1000),  # whole seconds
	st.integers(0, LAST_MS),  # with milliseconds
).map(lambda ms: EPOCH + timedelta(milliseconds=ms))
UNCONNECTED = redis.Redis()  # Job.create needs a connection to exist, and sends nothing through it


def rq_creates(identifier: str) -> Job:
	"""The installed rq's own Job.create with this id (rq 2.x validates ids there)."""
	return Job.create("builtins.print", id=identifier, connection=UNCONNECTED)


@settings(max_examples=3000, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(site=sites, schedule=schedules, slot=slots)
@example(site="site1.localhost", schedule="TS:1", slot=EPOCH)
@example(site="a_2E", schedule="%3A_2D-", slot=EPOCH + timedelta(milliseconds=1))
def test_parse_inverts_job_id_and_rq_takes_the_id(site, schedule, slot):
	"""parse(encode(x)) == x, so two different (site, schedule, slot) never share an id."""
	identifier = jobs.job_id(site, schedule, slot)
	assert jobs.parse_job_id(identifier) == (site, schedule, slot)
	assert rq_creates(identifier).id == identifier
	assert "\t" not in identifier and "\n" not in identifier  # the scheduler's Redis entries separate fields with them


def test_look_alike_names_get_ids_of_their_own():
	slot = datetime(2026, 3, 29, 1, 30, tzinfo=timezone.utc)
	triples = list(product(LOOK_ALIKE_SITES, LOOK_ALIKE_SCHEDULES, (slot, slot + timedelta(milliseconds=1))))
	ids = Counter(jobs.job_id(*triple) for triple in triples)
	shared = [identifier for identifier, count in ids.items() if count > 1]
	assert shared == [], f"{jobs.ID_FORM.name}: ids shared by several (site, schedule, slot): {shared}"


@pytest.mark.parametrize("form", jobs.ID_FORMS, ids=lambda form: form.name)
def test_a_namespace_gives_ids_of_its_own_and_refuses_another_benchs(form):
	"""Two benches on one Redis, with a site and a schedule named alike: rq's job keys are one per Redis, so their
	ids differ."""
	slot = datetime(2026, 3, 29, 1, 30, tzinfo=timezone.utc)
	made = {}
	for namespace in (None, "bench-a", "bench.b", "bench_c"):
		made[namespace] = form.encode("frontend", "TS-000001", slot, namespace)
		assert form.decode(made[namespace], namespace) == ("frontend", "TS-000001", slot)
	for namespace, identifier in made.items():
		if namespace != "bench-a":
			with pytest.raises(ValueError):
				form.decode(identifier, "bench-a")
	assert len(set(made.values())) == len(made)


def test_form_is_frappes_where_the_installed_rq_takes_it():
	"""Frappe v15's "<site>::" on rq 1.x, Frappe v16's "<site>||" on rq 2.0-2.7, the escaped form only when rq needs
	it."""
	frappe_v15, frappe_v16, escaped = jobs.ID_FORMS
	slot = datetime(2026, 3, 29, 1, 30, tzinfo=timezone.utc)
	if jobs.rq_accepts("site1.localhost::btu|TS:1 é|x"):
		expected = frappe_v15
	elif jobs.rq_accepts("site1.localhost||btu|TS 1%é|x"):
		expected = frappe_v16
	else:
		expected = escaped
	assert jobs.ID_FORM is expected
	assert {
		frappe_v15: "site1.localhost::btu|TS-000042|20260329T013000Z",
		frappe_v16: "site1.localhost||btu|TS-000042|20260329T013000Z",
		escaped: "site1_2Elocalhost--btu-TS_2D000042-20260329T013000Z",
	}[expected] == jobs.job_id("site1.localhost", "TS-000042", slot)


@pytest.mark.parametrize(
	"identifier",
	[
		"",
		"site1.localhost",
		"rq-job-1234",
		"btu",
		"--btu--",
		"::btu||",
		"s::btu|TS|20260329T013000",
		"s::btu|TS|20260329T013000.000Z",
		"s||btu|TS%3a1|20260329T013000Z",
		"s||btu|TS%1|20260329T013000Z",
		"s--btu-TS_2d1-20260329T013000Z",
		"s--btu-TS_41-20260329T013000Z",
		"s--btu-TS_FF-20260329T013000Z",
		"s--btu-TS-1-20260329T013000Z",
		"s--btu-TS-20260329T013000_2E000Z",
		"s::btu|TS|20261329T013000Z",
	],
)
def test_parse_refuses_what_job_id_never_writes(identifier):
	with pytest.raises(ValueError):
		jobs.parse_job_id(identifier)


def test_look_alike_sites_and_schedules_all_fire(engine_bench, processes, r):
	"""Two sites differing only in punctuation, each with five look-alike schedules: every one fires, none is a
	duplicate."""
	sites = ("x.y.localhost", "x-y.localhost")
	names = ("TS:1", "TS|1", "TS 1", "TS.1", "TS-1")
	bench, _ = engine_bench(*sites)
	for site in sites:
		with SiteData(bench, site) as data:
			task = data.insert_task(function_string="tests.engine.tasks.record", arguments={"key": "test:runs"})
			for name in names:
				data.insert_schedule(task, name=name, run_frequency="Cron Style", cron_string=ONE_SECOND)
	scheduler = processes.scheduler(bench.path)
	key = queue_key(bench)

	def fired() -> Counter:
		return Counter(jobs.parse_job_id(identifier)[:2] for identifier in queue_ids(r, key))

	wait_until(
		lambda: len(fired()) == len(sites) * len(names) and min(fired().values()) >= 2,
		30,
		f"every schedule fires\n{scheduler.tail()}",
	)
	outcomes = Counter(fire["outcome"] for site in sites for fire in recent_fires(r, site))
	assert outcomes[JobOutcome.DUPLICATE] == 0 and f" {JobOutcome.DUPLICATE} " not in scheduler.log(), outcomes
	assert set(fired()) == set(product(sites, names))
