"""The scheduler's Prometheus metrics: what each process counts, and the endpoint that serves them.

Every process counts into its own registry, whether or not it serves it:
the heartbeat carries a summary (`Metrics.summary`) that `btu-scheduler
status` and the Desk print, so they show the same figures as Prometheus.
`btu-scheduler run --metrics-port N` serves the registry over HTTP
(`MetricsServer`), on 127.0.0.1 unless `metrics_address` says otherwise;
with `metrics_bearer_token`, only to a scrape that sends it (as Prometheus's
`authorization` scrape setting does), and on any other address only with it
(or `metrics_allow_unauthenticated`).

Counters are the process's own (Prometheus's `rate()` and `increase()`
handle a restart); the state every process shares (schedules, prepared
fires, invalid rows, the quarantine) is read from Redis when scraped
(`StateCollector`), so a standby exports it too and the fire path pays
nothing for it. Only this bench's sites are read: benches sharing one set of
key names on a Redis list each other's sites in `btu:sites`, and a scrape must
not name a neighbour's. Label values are bounded: sites and queues are the
bench's, capped at MAX_LABEL_VALUES each; request types are the protocol's;
a schedule gets labels of its own only when `metrics_schedules` names it.
"""

from __future__ import annotations

import hmac
import ipaddress
import logging
import socket
import threading
import time
from bisect import bisect_left
from collections import Counter as Tally
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from itertools import accumulate
from socketserver import ThreadingMixIn
from wsgiref.simple_server import WSGIRequestHandler, WSGIServer, make_server

from prometheus_client import (
	CollectorRegistry,
	Counter,
	Gauge,
	Histogram,
	Info,
	PlatformCollector,
	ProcessCollector,
	make_wsgi_app,
)
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, HistogramMetricFamily
from prometheus_client.utils import floatToGoString

from btu import __version__
from btu.scheduler_daemon.store.outcomes import FireOutcome, ItemOutcome, JobOutcome
from btu.shared import protocol
from btu.shared.keys import Keys

logger = logging.getLogger("btu.scheduler")

# Milliseconds (a fire on time) to minutes (a fire after an outage, under fire_all).
FIRE_LAG_BUCKETS = (
	0.0005,
	0.001,
	0.0025,
	0.005,
	0.01,
	0.025,
	0.05,
	0.1,
	0.25,
	0.5,
	1,
	2.5,
	5,
	10,
	30,
	60,
	120,
	300,
	600,
)
RECONCILE_BUCKETS = (0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60)
MAX_LABEL_VALUES = 200
OTHER = "other"
RQ_QUEUE_PREFIX = "rq:queue:"
RELEASE_SKIPS = {FireOutcome.SKIPPED_OVERLAP: "overlap", FireOutcome.SKIPPED_CONCURRENCY: "concurrency"}
REDIS_ERROR_KINDS = ("outage", "refusal", "denied", "error")
LOSS_REASONS = ("lease_lost", "fenced", "stepped_down")
QUARANTINED = ("schedule_state", "prepared_fire", "key", "command_list")
# Scrapes served at once; one more gets 503 (a scrape takes about a millisecond).
MAX_SCRAPES = 4
SCRAPE_TIMEOUT_SECONDS = 10


@dataclass(frozen=True)
class Family:
	"""A metric family `Metrics` makes in its registry: its prometheus_client class, name, help, labels and buckets."""

	kind: type
	name: str
	documentation: str
	labels: tuple[str, ...] = ()
	buckets: tuple[float, ...] = ()

	def make(self, registry: CollectorRegistry):
		extra = {"buckets": self.buckets} if self.buckets else {}
		return self.kind(self.name, self.documentation, self.labels, registry=registry, **extra)


# `Metrics`' attribute -> its family: the leadership's, then (after the fires' collector) the rest, in that order.
LEASE_FAMILIES = {
	"leader": Family(Gauge, "btu_scheduler_leader", "1 while this process holds the leader lease, else 0 (a standby)"),
	"epoch": Family(
		Gauge,
		"btu_scheduler_lease_epoch",
		"Epoch of the lease this process holds, or of the current leader's as a standby last saw it",
	),
	"elections": Family(Counter, "btu_leader_elections_total", "Times this process took the leader lease"),
	"losses": Family(Counter, "btu_leader_losses_total", "Times this process stopped leading, by reason", ("reason",)),
	"renewals": Family(Counter, "btu_lease_renewals_total", "Lease renewals by outcome (renewed, lost)", ("outcome",)),
}
FAMILIES = {
	"skipped": Family(
		Counter,
		"btu_fires_skipped_total",
		"Slots that queued no job, by reason "
		"(overlap, concurrency, catch_up, expired, duplicate, requested: skipped on request)",
		("site", "reason"),
	),
	"returned": Family(
		Counter,
		"btu_fires_returned_total",
		"Prepared fires found past the misfire grace at release (no leader at their moment): "
		"planned again under the catch-up policy",
		("site",),
	),
	"push_refused": Family(
		Counter,
		"btu_fires_push_refused_total",
		"Pushes a queue refused (the fire stays prepared and is tried again)",
		("site", "queue"),
	),
	"fire_failures": Family(
		Counter,
		"btu_fire_failures_total",
		"Schedules that could not be planned or prepared, by stage (plan, prepare)",
		("site", "stage"),
	),
	"quarantined": Family(
		Counter,
		"btu_quarantined_total",
		"Wrong values this process moved aside, by what held them (schedule_state, prepared_fire, key, command_list)",
		("what",),
	),
	"redis_errors": Family(
		Counter,
		"btu_redis_errors_total",
		"Failed Redis steps of the main loop, by kind (outage, refusal, denied, error)",
		("kind",),
	),
	"database_errors": Family(
		Counter, "btu_database_errors_total", "Reconciles that found a site's database unreachable", ("site",)
	),
	"reconcile": Family(
		Histogram,
		"btu_reconcile_duration_seconds",
		"Seconds a reconcile took: full (every site) or schedules (named by RPC)",
		("kind",),
		RECONCILE_BUCKETS,
	),
	"rpc": Family(
		Counter,
		"btu_rpc_commands_total",
		"RPC commands popped, by request type and outcome (accepted, rejected, crashed)",
		("request_type", "outcome"),
	),
	"schedule_fires": Family(
		Counter, "btu_schedule_fires_total", "Fires of the schedules named in metrics_schedules", ("site", "schedule")
	),
	"schedule_lag": Family(
		Histogram,
		"btu_schedule_fire_lag_seconds",
		"Fire lag of the schedules named in metrics_schedules",
		("site", "schedule"),
		FIRE_LAG_BUCKETS,
	),
	"schedule_skipped": Family(
		Counter,
		"btu_schedule_skipped_total",
		"Skipped slots of the schedules named in metrics_schedules",
		("site", "schedule", "reason"),
	),
}


class BoundedLabel:
	"""Label values as given until MAX_LABEL_VALUES distinct ones were seen, then OTHER: a bounded series count."""

	def __init__(self, limit: int = MAX_LABEL_VALUES):
		self.limit = limit
		self.seen: set[str] = set()

	def __call__(self, value: str) -> str:
		if value in self.seen:
			return value
		if len(self.seen) >= self.limit:
			return OTHER
		self.seen.add(value)
		return value


def queue_name(queue_key: str) -> str:
	"""The RQ queue's name (as rq-exporter labels it) from its list key."""
	return queue_key[len(RQ_QUEUE_PREFIX) :] if queue_key.startswith(RQ_QUEUE_PREFIX) else queue_key


class Metrics:
	"""One process's counters and gauges, in a registry of its own; `schedules`: the names given labels of their own."""

	def __init__(self, process_id: str = "", executor: str = "", schedules: Iterable[str] = ()):
		# No auto_describe: it would collect (read Redis) when a collector registers.
		self.registry = CollectorRegistry()
		self.schedules = frozenset(schedules)
		self.site = BoundedLabel()
		self.queue = BoundedLabel()
		r = self.registry
		ProcessCollector(registry=r)
		PlatformCollector(registry=r)
		Info("btu_scheduler", "This scheduler process", registry=r).info(
			{"process": process_id, "version": __version__, "executor": executor, "host": socket.gethostname()}
		)
		for attribute, family in LEASE_FAMILIES.items():
			setattr(self, attribute, family.make(r))
		# Fires and their lag are counted by the fire path in plain lists and exported by `FireCollector`: a locked
		# Counter.inc and Histogram.observe per fire cost 2.4 us of the leader's CPU, these lists under 0.5 us.
		self.fire_counts: dict[tuple[str, str], FireCounts] = {}
		r.register(FireCollector(self.fire_counts))
		for attribute, family in FAMILIES.items():
			setattr(self, attribute, family.make(r))
		# What `summary` reports, counted beside the registry so that a heartbeat on the firing loop reads a few
		# integers instead of collecting every series. The listener and reconciler threads count too: hence the lock.
		self.lock = threading.Lock()
		self.tally = Tally()
		self.skips = Tally()
		# Present at 0 from the start: a series born at 1 hides its first event from rate() and increase().
		for counter, values in (
			(self.redis_errors, REDIS_ERROR_KINDS),
			(self.renewals, ("renewed", "lost")),
			(self.losses, LOSS_REASONS),
			(self.quarantined, QUARANTINED),
		):
			for value in values:
				counter.labels(value)

	# -- leadership --------------------------------------------------------------------

	def watch_lease(self, lease) -> None:
		"""btu_scheduler_leader reads the lease when scraped: 1 only while it is held and its last renewal has not
		run out, so a leader cut off from Redis reads 0 once a standby may have taken over."""
		self.leader.set_function(lambda: 1.0 if lease.valid() else 0.0)

	def led(self, epoch: int | None) -> None:
		self.count("elections")
		self.elections.inc()
		if epoch is not None:
			self.epoch.set(epoch)

	def stopped_leading(self, reason: str) -> None:
		self.losses.labels(reason).inc()

	def renewed(self, kept: bool) -> None:
		self.renewals.labels("renewed" if kept else "lost").inc()

	def saw_lease(self, value: str | None) -> None:
		"""A standby's view of the lease ("<epoch>|<holder>"), for the epoch gauge."""
		epoch = (value or "").split("|", 1)[0]
		if epoch.isdigit():
			self.epoch.set(int(epoch))

	# -- firing ----------------------------------------------------------------------------

	def released(self, fires) -> None:
		"""Count a release's fires (`state.Released`): enqueued (with lag), skipped, returned, refused, quarantined."""
		series: dict[tuple[str, str], FireCounts] = {}  # this batch's, by the entry's own site and queue key
		named = self.schedules
		for fire in fires:
			if fire.outcome == FireOutcome.QUARANTINED:
				self.quarantine("prepared_fire")
				continue
			entry = fire.entry
			if fire.outcome == FireOutcome.ENQUEUED:
				counts = series.get((entry.site, entry.queue_key))
				if counts is None:
					counts = series[(entry.site, entry.queue_key)] = self.fire_counts_of(
						self.site(entry.site), entry.queue_key
					)
				counts.observe(fire.lag_ms / 1000)
				if named and entry.schedule in named:
					self.schedule_released(self.site(entry.site), entry.schedule, fire)
				continue
			site = self.site(entry.site)
			if fire.outcome in RELEASE_SKIPS:
				self.skip(site, RELEASE_SKIPS[fire.outcome])
			elif fire.outcome == FireOutcome.RETURNED:
				self.count("returned")
				self.returned.labels(site).inc()
			elif fire.outcome == FireOutcome.PUSH_REFUSED:
				self.push_refused.labels(site, self.queue(queue_name(entry.queue_key))).inc()
			if named and entry.schedule in named:
				self.schedule_released(site, entry.schedule, fire)

	def fire_counts_of(self, site: str, queue_key: str) -> FireCounts:
		"""The counts of a site's fires on one queue (labelled with the queue's RQ name), made at its first fire."""
		queue = self.queue(queue_name(queue_key))
		counts = self.fire_counts.get((site, queue))
		if counts is None:
			counts = self.fire_counts[(site, queue)] = FireCounts()
		return counts

	def schedule_released(self, site: str, schedule: str, fire) -> None:
		if fire.outcome == FireOutcome.ENQUEUED:
			self.schedule_fires.labels(site, schedule).inc()
			self.schedule_lag.labels(site, schedule).observe(fire.lag_ms / 1000)
		elif fire.outcome in RELEASE_SKIPS:
			self.schedule_skipped.labels(site, schedule, RELEASE_SKIPS[fire.outcome]).inc()

	def prepared(self, items, results) -> None:
		"""Count a prepare (`planner.FireItem`s, `state.ItemResult`s): the skips and duplicates of items it
		wrote, states it moved aside, writes refused. A stale item (another leader moved on) counts nothing."""
		for item, result in zip(items, results):
			site = self.site(item.site)
			if result.outcome == ItemOutcome.CORRUPT:
				self.quarantine("schedule_state")
			elif result.outcome == ItemOutcome.FAILED:
				self.fire_failures.labels(site, "prepare").inc()
			elif result.outcome == ItemOutcome.WRITTEN:
				duplicates = sum(1 for job in result.jobs if job == JobOutcome.DUPLICATE)
				counts = (
					("catch_up", item.skipped),
					("expired", item.expired),
					("duplicate", duplicates),
					("requested", len(item.skipped_by_request)),
				)
				for reason, count in counts:
					if count:
						self.skip(site, reason, count)
						if item.schedule in self.schedules:
							self.schedule_skipped.labels(site, item.schedule, reason).inc(count)

	def planned(self, plan) -> None:
		"""Schedules not planned (`planner.Plan.failed`); corrupt states count as `State.quarantine` moves them."""
		for bad in plan.failed:
			self.fire_failures.labels(self.site(bad.site), "plan").inc()

	def skip(self, site: str, reason: str, count: int = 1) -> None:
		self.skipped.labels(site, reason).inc(count)
		with self.lock:
			self.skips[reason] += count

	def quarantine(self, what: str, count: int = 1) -> None:
		"""Wrong values moved aside: a schedule's state, a prepared fire, a whole key, the RPC command list."""
		self.quarantined.labels(what if what in QUARANTINED else "key").inc(count)

	def count(self, event: str, count: int = 1) -> None:
		with self.lock:
			self.tally[event] += count

	# -- the rest of the process -------------------------------------------------------

	def redis_error(self, kind: str) -> None:
		self.count("redis_errors")
		self.redis_errors.labels(kind if kind in REDIS_ERROR_KINDS else "error").inc()

	def database_error(self, site: str) -> None:
		self.count("database_errors")
		self.database_errors.labels(self.site(site)).inc()

	def reconcile_timer(self, kind: str):
		"""A context timing one reconcile of `kind` (full, schedules) into btu_reconcile_duration_seconds."""
		return self.reconcile.labels(kind).time()

	def rpc_command(self, request_type, outcome: str) -> None:
		"""A popped command; a request type not the protocol's counts as "other" (made-up types add no series)."""
		kind = request_type if request_type in protocol.REQUEST_TYPES else OTHER
		self.count("rpc_commands")
		self.rpc.labels(kind, outcome).inc()

	# -- the figures `status` and the Desk print ---------------------------------------------

	def summary(self) -> dict:
		"""This process's figures since it started, as scraped (heartbeats carry them to status and the Desk)."""
		lags = [sum(bucket) for bucket in zip(*(counts.buckets for counts in list(self.fire_counts.values())))] or [0]
		buckets = list(zip((*FIRE_LAG_BUCKETS, float("inf")), accumulate(lags)))
		with self.lock:
			tally, skips = dict(self.tally), dict(self.skips)
		return {
			"fires": buckets[-1][1],
			"lag_p50_ms": quantile_ms(0.5, buckets),
			"lag_p99_ms": quantile_ms(0.99, buckets),
			"skipped": dict(sorted(skips.items())),
			**{
				event: tally.get(event, 0)
				for event in ("returned", "elections", "redis_errors", "database_errors", "rpc_commands")
			},
		}


class FireCounts:
	"""One site's fires on one queue: per lag bucket (not cumulative; the last past every bound) and the lags' sum.
	Only the firing loop writes; a scrape reads a copy, its count the buckets' total, so fires and lag always agree."""

	__slots__ = ("buckets", "sum")

	def __init__(self):
		self.buckets = [0] * (len(FIRE_LAG_BUCKETS) + 1)
		self.sum = 0.0

	def observe(self, seconds: float) -> None:
		self.buckets[bisect_left(FIRE_LAG_BUCKETS, seconds)] += 1
		self.sum += seconds


class FireCollector:
	"""btu_fires_total and btu_fire_lag_seconds from the fire path's `FireCounts`, by site and queue."""

	BOUNDS = tuple(floatToGoString(bound) for bound in (*FIRE_LAG_BUCKETS, float("inf")))

	def __init__(self, fire_counts: dict):
		self.fire_counts = fire_counts

	def collect(self):
		fires = CounterMetricFamily(
			"btu_fires_total", "Fires whose job was pushed onto its RQ queue", labels=["site", "queue"]
		)
		lag = HistogramMetricFamily(
			"btu_fire_lag_seconds", "Seconds from a fire's moment to its job on the queue", labels=["site", "queue"]
		)
		for (site, queue), counts in list(self.fire_counts.items()):
			total, cumulative = counts.sum, list(accumulate(list(counts.buckets)))
			fires.add_metric([site, queue], cumulative[-1])
			lag.add_metric([site, queue], list(zip(self.BOUNDS, cumulative)), total)
		yield fires
		yield lag


def quantile_ms(q: float, buckets: list[tuple[float, float]]) -> float | None:
	"""The q-quantile in ms of a cumulative histogram [(le, count)], interpolated within its bucket as
	Prometheus's histogram_quantile does (None without observations; the highest finite bound past it)."""
	if not buckets or buckets[-1][1] == 0:
		return None
	rank = q * buckets[-1][1]
	lower_bound, lower_count = 0.0, 0.0
	for bound, count in buckets:
		if count >= rank:
			if bound == float("inf"):
				return round(lower_bound * 1000, 3)
			width = count - lower_count
			fraction = (rank - lower_count) / width if width else 1.0
			return round((lower_bound + (bound - lower_bound) * fraction) * 1000, 3)
		lower_bound, lower_count = bound, count
	return None


class StateCollector:
	"""The state every process shares, read from Redis when scraped: schedules and invalid rows per site,
	prepared fires, schedules overdue, quarantined values. Redis failing gives btu_state_readable 0, never a failed
	scrape."""

	def __init__(self, redis_conn, keys: Keys, bench_sites: Callable[[], Iterable[str]]):
		self.redis = redis_conn
		self.keys = keys
		self.bench_sites = bench_sites

	def collect(self):
		readable = GaugeMetricFamily(
			"btu_state_readable", "1 when this scrape could read the scheduler state from Redis"
		)
		try:
			families = self.read()
		except Exception as exc:  # any failure: the process metrics must still be served
			logger.debug("metrics state read failed: %s", exc)
			readable.add_metric([], 0)
			yield readable
			return
		readable.add_metric([], 1)
		yield readable
		yield from families

	def read(self) -> list[GaugeMetricFamily]:
		# Leniently decoded: one member that is not UTF-8 must not blank every gauge (the audit moves it aside).
		listed = {s.decode("utf-8", "replace") for s in self.redis.smembers(self.keys.sites)}
		sites = sorted(listed.intersection(self.bench_sites()))[:MAX_LABEL_VALUES]
		now_ms = time.time() * 1000
		with self.redis.pipeline(transaction=False) as pipe:
			pipe.zcard(self.keys.prepared)
			pipe.zcount(self.keys.due, "-inf", now_ms)
			pipe.hlen(self.keys.quarantine)
			for site in sites:
				pipe.scard(self.keys.site_schedules_key(site))
				pipe.hlen(self.keys.invalid_rows_key(site))
			values = [v if isinstance(v, int) else None for v in pipe.execute(raise_on_error=False)]
		prepared, overdue, quarantined, *per_site = values
		schedules = GaugeMetricFamily("btu_schedules", "Schedules in the scheduler state", labels=["site"])
		invalid = GaugeMetricFamily(
			"btu_invalid_schedules", "Schedule rows the scheduler refused (see btu-scheduler status)", labels=["site"]
		)
		for index, site in enumerate(sites):
			for family, value in ((schedules, per_site[2 * index]), (invalid, per_site[2 * index + 1])):
				if value is not None:
					family.add_metric([site], value)
		families = [schedules, invalid]
		for name, doc, value in (
			("btu_prepared_fires", "Fires written ahead of their moment, not yet released", prepared),
			("btu_overdue_schedules", "Schedules whose fire time has passed and that no leader has fired yet", overdue),
			("btu_quarantine_entries", "Wrong values moved aside and still listed in the quarantine", quarantined),
		):
			if value is not None:  # a key of the wrong type: the audit moves it aside; status names it
				families.append(GaugeMetricFamily(name, doc, value=value))
		return families


class _QuietHandler(WSGIRequestHandler):
	timeout = SCRAPE_TIMEOUT_SECONDS  # an idle or slow client does not keep its thread

	def log_message(self, format, *args):  # a scrape every few seconds is no event worth a line
		pass


class _ThreadingServer(ThreadingMixIn, WSGIServer):
	daemon_threads = True


class _ThreadingServer6(_ThreadingServer):
	address_family = socket.AF_INET6


class MetricsServer:
	"""Serves a registry at /metrics (any path answers, as prometheus_client's own server does) on a daemon thread;
	with `token`, only to requests that carry it as a bearer token."""

	def __init__(self, registry: CollectorRegistry, address: str, port: int, token: str | None = None):
		server_class = _ThreadingServer6 if is_ipv6(address) else _ThreadingServer
		app = limited(make_wsgi_app(registry), MAX_SCRAPES)
		self.server = make_server(
			address, port, bearer_only(app, token) if token else app, server_class, handler_class=_QuietHandler
		)
		self.address = address
		self.port = self.server.server_port
		self.thread = threading.Thread(target=self.server.serve_forever, name="btu-metrics", daemon=True)

	def start(self) -> MetricsServer:
		self.thread.start()
		return self

	def stop(self) -> None:
		self.server.shutdown()
		self.server.server_close()


def bearer_only(app, token: str):
	"""`app` for requests whose Authorization header is "Bearer <token>"; any other is answered 401 before a scrape."""
	expected = f"Bearer {token}".encode()

	def serve(environ, start_response):
		given = environ.get("HTTP_AUTHORIZATION", "").encode("latin-1", "replace")
		# compare_digest: the time a refusal takes tells nothing of how much of the token was right.
		if not hmac.compare_digest(given, expected):
			start_response(
				"401 Unauthorized",
				[("Content-Type", "text/plain"), ("WWW-Authenticate", 'Bearer realm="btu-scheduler"')],
			)
			return [b"send Authorization: Bearer <metrics_bearer_token>\n"]
		return app(environ, start_response)

	return serve


def limited(app, slots: int):
	"""`app` serving at most `slots` requests at once; one more is answered 503 at once."""
	free = threading.BoundedSemaphore(slots)

	def serve(environ, start_response):
		if not free.acquire(blocking=False):
			start_response("503 Service Unavailable", [("Content-Type", "text/plain"), ("Retry-After", "1")])
			return [b"too many scrapes at once\n"]
		try:
			return app(environ, start_response)
		finally:
			free.release()

	return serve


def is_ipv6(address: str) -> bool:
	try:
		return ipaddress.ip_address(address).version == 6
	except ValueError:
		return False


def exposure_refusal(address: str, token: str | None, allow_unauthenticated: bool) -> str | None:
	"""Why the endpoint may not listen on `address` as configured, or None: an address other hosts can reach needs
	`metrics_bearer_token`, or `metrics_allow_unauthenticated` for a network only Prometheus reaches. The process's
	host name and its bench's site names are no one else's business."""
	if token or allow_unauthenticated or is_loopback(address):
		return None
	return (
		f"metrics_address {address} is reachable from other hosts and metrics_bearer_token is not set; "
		"set metrics_bearer_token in the configuration file (Prometheus sends it with authorization: credentials), "
		"listen on 127.0.0.1, or set metrics_allow_unauthenticated = true if only Prometheus can reach that network"
	)


def is_loopback(address: str) -> bool:
	"""Whether every address `address` resolves to is a loopback one (a name that does not resolve is not)."""
	try:
		found = {info[4][0] for info in socket.getaddrinfo(address, None, proto=socket.IPPROTO_TCP)}
	except (socket.gaierror, UnicodeError):
		return False
	return bool(found) and all(ipaddress.ip_address(ip.split("%", 1)[0]).is_loopback for ip in found)
