"""The scheduler process: stand by or lead, and fire what is due.

Every process runs the same threads:

- the main loop, which either stands by (sleeping until the lease can be
  taken, woken at once by a leader's handoff) or leads. A leader fires
  through `firing.FirePipeline`: what is due within `prepare_ahead_secs` (by
  Redis's clock) is prepared ahead, and released at its moment, so a
  thousand fires due at one instant are queued within milliseconds. The
  loop sleeps until the next moment to release or to prepare, the next
  lease renewal, or a wake;
- a notifier, subscribed to the wake and handoff channels;
- the RPC listener (unless `disable_redis_rpc`);
- the reconciler (`reconcile_thread`), which the leader runs every
  `full_refresh_interval_secs`, and which publishes the status.

No polling: an idle leader wakes only to renew its lease (a third of the
lease TTL), a standby only when the lease could have expired.
"""

from __future__ import annotations

import faulthandler
import logging
import os
import signal
import socket
import sys
import threading
import time
import uuid
from datetime import datetime, timezone
from pathlib import Path

import redis

from btu.scheduler_daemon.leading import status, worker_candidate
from btu.scheduler_daemon.leading.candidacy import Candidacy
from btu.scheduler_daemon.leading.firing import FirePipeline
from btu.scheduler_daemon.leading.lease import Lease
from btu.scheduler_daemon.leading.reconcile_thread import ReconcileThread
from btu.scheduler_daemon.log import log_event
from btu.scheduler_daemon.operations import redis_acl
from btu.scheduler_daemon.operations.config import Config
from btu.scheduler_daemon.operations.metrics import Metrics, StateCollector
from btu.scheduler_daemon.operations.redis_failures import MAX_BACKOFF, REDIS_ERRORS, RedisFailures, is_outage
from btu.scheduler_daemon.operations.replication import Replication
from btu.scheduler_daemon.reads.bench import BenchError
from btu.scheduler_daemon.reconcile.frappe_job_sites import FrappeJobSites
from btu.scheduler_daemon.reconcile.reconciler import AUDIT_EVERY, Reconciler
from btu.scheduler_daemon.rpc.dispatcher import RpcDispatcher
from btu.scheduler_daemon.rpc.listener import start_listener_thread
from btu.scheduler_daemon.store.state import State
from btu.shared.keys import Keys
from btu.shared.redis_refusals import is_denied
from btu.shared.sentinel import pubsub_client

logger = logging.getLogger("btu.scheduler")
# A message wakes the notifier at once; the timeout only lets it see `stop`, which a daemon
# thread need not, so an idle scheduler wakes for it rarely.
NOTIFY_BLOCK_SECONDS = 30.0
# An idle leader wakes to renew its lease (a third of its TTL) but looks for fires only
# when a moment comes or a change is announced, and at least this often, in case an
# announcement was lost.
RECHECK_SECONDS = 10.0
# The Desk calls a scheduler gone after 60 s without one (btu_configuration.js).
HEARTBEAT_SECONDS = 5.0
SWITCH_INTERVAL_SECONDS = 0.0005
# A release whose queue refused the push keeps its fires prepared; it is tried again after this.
PUSH_RETRY_SECONDS = 1.0
# A scrape's read of the shared state (metrics.StateCollector) gives up after this: the scrape still answers.
STATE_READ_SECONDS = 2.0


class Clock:
	"""Redis's time, estimated locally between the scripts that report it."""

	def __init__(self):
		self.offset = 0.0

	def sync(self, redis_now_ms: float) -> None:
		"""`redis_now_ms` keeps its microseconds as a fraction: the leader sleeps by this offset until a moment."""
		self.offset = redis_now_ms / 1000 - time.time()

	def now(self) -> datetime:
		return datetime.fromtimestamp(time.time() + self.offset, timezone.utc)

	def seconds_until(self, redis_ms: int) -> float:
		return redis_ms / 1000 - (time.time() + self.offset)


class Notifier:
	"""The notifier thread: the main loop woken by each message on the wake and handoff channels, and each time this
	subscribes (something may have changed while it was not)."""

	def __init__(self, config: Config, keys: Keys, wake: threading.Event, access: redis_acl.Access):
		self.config = config
		self.keys = keys
		self.wake = wake
		self.access = access

	def run(self, stop: threading.Event) -> None:
		backoff = 0.1
		while not stop.is_set():
			pubsub = None
			try:
				pubsub = pubsub_client(self.config.redis(socket_timeout=None, socket_connect_timeout=3)).pubsub(
					ignore_subscribe_messages=True
				)
				pubsub.subscribe(self.keys.wake_channel, self.keys.handoff_channel)
				pubsub.get_message(timeout=1)  # SUBSCRIBE's reply: a refused channel raises here, not later
				self.access.ok()
				backoff = 0.1
				self.wake.set()  # something may have changed while unsubscribed
				while not stop.is_set():
					if pubsub.get_message(timeout=NOTIFY_BLOCK_SECONDS):
						self.wake.set()
			# BenchError: the bench's Redis settings are being edited; retry
			except (*REDIS_ERRORS, redis.ResponseError, BenchError) as exc:
				if is_denied(exc):
					self.access.denied(exc)
				stop.wait(backoff)
				backoff = min(backoff * 2, MAX_BACKOFF)
			finally:
				if pubsub is not None:
					try:
						pubsub.close()
					except Exception:
						pass


class Scheduler:
	def __init__(self, config: Config, bench_path: str | Path, worker_pid: int | None = None):
		"""`worker_pid`: run as that Frappe worker's candidate (worker_candidate), else as a dedicated scheduler."""
		self.config = config
		self.bench_path = bench_path
		self.process_id = f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:6]}"
		self.redis = config.redis(socket_timeout=10, socket_connect_timeout=3)
		self.keys = config.keys()
		self.clock = Clock()
		self.metrics = Metrics(self.process_id, config.executor, config.metrics_schedules)
		self.metrics.registry.register(
			StateCollector(
				config.redis(socket_timeout=STATE_READ_SECONDS, socket_connect_timeout=STATE_READ_SECONDS),
				self.keys,
				lambda: self.reconciler.snapshot().bench.site_names(),
			)
		)
		self.state = State(self.redis, self.keys, config.replica_ack_timeout_ms, on_quarantine=self.metrics.quarantine)
		self.replication = Replication(self.redis, self.state, config.replica_acks)
		self.lease = Lease(self.redis, self.keys, self.process_id, config.lease_ttl_secs)
		self.candidacy = Candidacy(self.redis, self.keys, self.process_id, worker_pid)
		self.metrics.watch_lease(self.lease)
		self.connections = config.connections()
		self.frappe_jobs = FrappeJobSites(self.keys)
		self.reconciler = Reconciler(
			bench_path,
			self.state,
			config.executor,
			self.clock.now,
			self.publish_wake,
			audit_secs=AUDIT_EVERY * config.full_refresh_interval_secs,
			metrics=self.metrics,
			connections=self.connections,
			frappe_jobs=self.frappe_jobs,
		)
		self.wake = threading.Event()
		self.started_at = datetime.now(timezone.utc)
		self.leader_since: datetime | None = None
		self.access, self.notify_access, self.reconcile_access = (
			redis_acl.Access(self.redis, self.keys, self.reconciler.snapshot().bench.bench_id, self.process_id, part)
			for part in ("main", "notifier", "reconciler")
		)
		self.redis_failures = RedisFailures(self.process_id, self.access, self.replication, self.metrics)
		self.notifier = Notifier(config, self.keys, self.wake, self.notify_access)
		self.renew_every = max(config.lease_ttl_secs / 3, 0.05)
		self.next_renew = self.next_heartbeat = 0.0
		self.next_check = 0.0  # when the leader next looks for fires to release or prepare
		self.retry_push_at = 0.0  # a queue refused a push: not before this
		self.heartbeat_role: str | None = None
		self.acks = status.FrappeJobAcks(config.lease_ttl_secs)
		self.shared_redis = status.SharedRedisWatch(bench_path, self.keys)
		self.firing = FirePipeline(self.state, self.lease, config, self.clock, self.metrics)
		self.reconciling = ReconcileThread(
			self.reconciler, self.lease, config, self.state, self.reconcile_access, self.wake
		)

	# -- process ----------------------------------------------------------------

	def run(self, stop: threading.Event) -> None:
		log_event(
			logger,
			logging.INFO,
			"scheduler_started",
			process=self.process_id,
			bench=str(self.bench_path),
			executor=self.config.executor,
		)
		self.reconciler.stop_with(stop)
		if self.candidacy.worker_pid:
			worker_candidate.ParentWatch(self.candidacy.worker_pid, stop, self.wake.set).start()
		threads = [
			threading.Thread(target=self.notifier.run, args=(stop,), name="btu-notifier", daemon=True),
			threading.Thread(target=self.reconciling.run, args=(stop,), name="btu-reconciler", daemon=True),
		]
		for thread in threads:
			thread.start()
		listener_redis = self.config.redis(socket_timeout=None, socket_connect_timeout=3)
		start_listener_thread(
			listener_redis,
			self.keys,
			RpcDispatcher(self.reconciler),
			self.config,
			stop,
			process_id=self.process_id,
			metrics=self.metrics,
		)
		try:
			while not stop.is_set():
				try:
					if self.lease.held:
						self.lead_once(stop)
					else:
						self.stand_by(stop)
					self.redis_failures.ok()
				except REDIS_ERRORS as exc:  # NOPERM (grants revoked while running) is one
					self.redis_failures.failed(exc, stop)
		finally:
			self.step_down("stopped")
			self.wake.set()
			try:
				status.forget_process(self.redis, self.keys, self.process_id)
			except REDIS_ERRORS:
				pass  # Redis is down: the heartbeat expires on its own
			log_event(logger, logging.INFO, "scheduler_stopped", process=self.process_id)

	def step_down(self, reason: str) -> None:
		if self.lease.held:
			try:
				self.acks.drop(self.redis, self.lease)
				self.lease.release()
			except REDIS_ERRORS:
				self.lease.lost()
			self.stop_leading("stepped_down", logging.INFO, "leader_stepped_down", reason=reason)
		self.leader_since = None

	def stop_leading(self, metric: str, level: int, event: str, **fields) -> None:
		"""What every end of a term does once the lease is given up or lost: the acknowledgements forgotten (those a
		step down did not delete may be the next leader's), the term ended, counted and logged."""
		self.acks.forget()
		self.leader_since = None
		self.metrics.stopped_leading(metric)
		log_event(logger, level, event, process=self.process_id, **fields)

	def publish_wake(self) -> None:
		try:
			self.redis.publish(self.keys.wake_channel, self.process_id)
		except redis.RedisError:
			pass  # the leader still wakes at its next fire or renewal; the notifier reports a refused channel
		self.wake.set()

	# -- standing by -------------------------------------------------------------------

	def stand_by(self, stop: threading.Event) -> None:
		if self.candidacy.defers():
			self.heartbeat()
			self.wake.clear()
			self.wake.wait(self.config.lease_ttl_secs)
			return
		if self.lease.acquire():
			self.frappe_jobs.new_term()
			self.leader_since = datetime.now(timezone.utc)
			self.next_renew = time.monotonic() + self.renew_every
			self.next_check = 0.0
			self.metrics.led(self.lease.epoch)
			log_event(
				logger,
				logging.INFO,
				"leader_elected",
				process=self.process_id,
				epoch=self.lease.epoch,
				**self.candidacy.fields(),
			)
			self.reconciling.new_term()
			self.heartbeat()
			return
		self.heartbeat()
		lease_value, pttl = self.lease.current()
		self.metrics.saw_lease(lease_value)
		wait = pttl / 1000 if pttl and pttl > 0 else 0.05
		self.wake.clear()
		self.wake.wait(min(wait + 0.005, self.config.lease_ttl_secs))

	# -- leading ---------------------------------------------------------------------------

	def lead_once(self, stop: threading.Event) -> None:
		if self.candidacy.yields():
			self.step_down("a dedicated btu-scheduler runs")
			self.heartbeat()
			return
		if self.replication.stale and self.replication.refresh():
			self.reconciling.due.set()
		if time.monotonic() >= self.next_renew:
			kept = self.lease.renew()
			self.metrics.renewed(kept)
			if not kept:
				self.stop_leading("lease_lost", logging.WARNING, "leader_lost_lease")
				return
			self.next_renew = time.monotonic() + self.renew_every
			self.heartbeat()
		if self.wake.is_set() or time.monotonic() >= self.next_check:
			self.wake.clear()
			if not self.fire_due():
				return
		sleep = min(self.next_renew, self.next_check) - time.monotonic()
		if sleep > 0:
			self.wake.wait(sleep)

	def fire_due(self) -> bool:
		"""Release what has come, prepare what is due, and set when to look again; False when fenced off."""
		released = self.firing.release()
		if released.fenced:
			return self.fenced()
		if released.push_refused:
			self.retry_push_at = time.monotonic() + PUSH_RETRY_SECONDS
		if released.released:
			self.reconciling.publish_soon()
		# A new term's catch-up (fires due longer ago than the grace: missed while no leader ran) waits for the term's
		# first full reconcile, which drops the schedules and run requests deleted or cancelled meanwhile.
		held_ms = self.firing.grace_ms if self.reconciling.catch_up_held() else None
		due = self.state.due(self.config.batch_size, self.firing.ahead_ms, held_ms)
		self.clock.sync(due.now_us / 1000)
		if due.moved_aside:
			self.metrics.quarantine("key")
			self.reconciling.due.set()
		if due.entries:
			prepared = self.firing.prepare(due)
			if prepared.fenced:
				return self.fenced()
			if prepared.resync:
				self.reconciling.due.set()
			self.next_check = 0.0  # more may be due
			return True
		until = RECHECK_SECONDS
		if due.next_due_ms is not None:
			until = min(until, self.clock.seconds_until(due.next_due_ms - self.firing.ahead_ms))
		if due.next_prepared_ms is not None:
			until = min(until, self.clock.seconds_until(due.next_prepared_ms))
		self.next_check = max(time.monotonic() + until, self.retry_push_at)
		return True

	def fenced(self) -> bool:
		"""Another process took the lease: stand by; always False, what `fire_due` returns then."""
		self.lease.lost()
		self.stop_leading(
			"fenced", logging.WARNING, "leader_fenced", reason="another process holds the lease; nothing was enqueued"
		)
		return False

	# -- observability -------------------------------------------------------------------------

	def heartbeat(self) -> None:
		"""Say this process is alive: every HEARTBEAT_SECONDS, and at once when its role changed."""
		role = "leader" if self.lease.held else "standby"
		if role == self.heartbeat_role and time.monotonic() < self.next_heartbeat:
			return
		if self.replication.refresh() and self.lease.held:
			self.reconciling.due.set()
		status.write_heartbeat(
			self.redis,
			self.keys,
			self.process_id,
			role=role,
			started_at=self.started_at,
			leader_since=self.leader_since,
			ttl_secs=max(self.config.lease_ttl_secs * 3, 15),
			redis=self.replication.describe(),
			metrics=self.metrics.summary(),
			databases=self.connections.snapshot(),
			acks=self.acks.next(self.frappe_jobs.acks(self.reconciler.health()), self.lease),
			bench=self.shared_redis.bench(),
			**self.candidacy.fields(),
		)
		self.shared_redis.check(self.redis)
		self.heartbeat_role = role
		self.next_heartbeat = time.monotonic() + HEARTBEAT_SECONDS


def serve(scheduler: Scheduler) -> None:
	"""Run `scheduler` until SIGTERM, SIGINT or SIGHUP; each releases the lease so a standby takes over at once."""
	stop = threading.Event()

	def stop_now() -> None:
		stop.set()
		scheduler.wake.set()

	def request_stop(signum, frame):
		# Not Event.set() here: it takes the event's lock, which the interrupted main thread may be holding (a wait
		# being woken re-acquires it), and the handler would wait on it for ever. Another thread sets them.
		threading.Thread(target=stop_now, name="btu-stop", daemon=True).start()

	# SIGHUP too: a closed terminal or a process manager's reload must hand the lease over, not drop it.
	for signum in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
		signal.signal(signum, request_stop)
	# `kill -USR1 <pid>` prints every thread's stack to stderr (the log): how a scheduler that hangs tells where.
	faulthandler.register(signal.SIGUSR1, all_threads=True)
	# A moment's release must not wait out CPython's 5 ms GIL switch interval behind the
	# reconciler thread; the shorter interval costs nothing while no other thread runs.
	sys.setswitchinterval(SWITCH_INTERVAL_SECONDS)
	scheduler.run(stop)
