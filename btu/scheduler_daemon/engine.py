"""The scheduler process: stand by or lead, and fire what is due.

Every process runs the same threads:

- the main loop, which either stands by (sleeping until the lease can be
  taken, woken at once by a leader's handoff) or leads. A leader fires in
  two steps. *Prepare*: what is due within `prepare_ahead_secs` (by Redis's
  clock) is planned, its jobs built and written, and its slots claimed, in
  batches through the prepare script. *Release*: at each moment the release
  script pushes the jobs prepared for it, a few Redis commands per job, so
  a thousand fires due at one instant are queued within milliseconds. The
  loop sleeps until the next moment to release or to prepare, the next
  lease renewal, or a wake;
- a notifier, subscribed to the wake and handoff channels;
- the RPC listener (unless `disable_redis_rpc`);
- the reconciler, which the leader runs every `full_refresh_interval_secs`.

No polling: an idle leader wakes only to renew its lease (a third of the
lease TTL), a standby only when the lease could have expired.
"""

from __future__ import annotations

import json
import logging
import os
import signal
import socket
import sys
import threading
import time
import uuid
from datetime import datetime, timedelta, timezone
from functools import lru_cache
from pathlib import Path

import redis

from btu.shared import protocol
from btu.shared.instants import from_ms, slot_text, to_ms
from btu.shared.schedule import ScheduleSpec
from btu.scheduler_daemon import redis_acl, status
from btu.scheduler_daemon.bench import BenchError
from btu.scheduler_daemon.config import Config
from btu.scheduler_daemon.dispatcher import RpcDispatcher
from btu.scheduler_daemon.jobs import JobShape, JobTemplate, job_id, rq_time
from btu.scheduler_daemon.lease import Lease
from btu.scheduler_daemon.listener import start_listener_thread
from btu.scheduler_daemon.log import log_event
from btu.scheduler_daemon.reconcile import AUDIT_EVERY, Reconciler
from btu.scheduler_daemon.state import CORRUPT, FAILED, STALE, FireItem, FireJob, ItemResult, Released, State, fire_record, text

logger = logging.getLogger("btu.scheduler")
# Redis not answering, or refusing (out of memory, read-only replica, a permission, a wrong
# value the state layer did not expect): the process backs off and tries again, never exits.
REDIS_ERRORS = (redis.RedisError, ConnectionError, OSError)
OUTAGES = (redis.ConnectionError, redis.TimeoutError, ConnectionError, OSError)
# Redis answering but refusing every write (lua/guard.lua's SERVER_WIDE): redis-py 5+ raises these
# classes, 4.5 a plain ResponseError starting with the code. The main loop reports those.
REFUSALS = (redis.ReadOnlyError, redis.BusyLoadingError, getattr(redis.exceptions, "OutOfMemoryError", redis.ReadOnlyError))
REFUSAL_CODES = ("OOM", "READONLY", "MASTERDOWN", "LOADING", "BUSY", "NOREPLICAS", "MISCONF")
MAX_BACKOFF = 5.0
RESTORED_AFTER_SECONDS = 2.0
OUTAGE_KINDS = "outage:"  # how redis_failure names an outage (any other failure is a refusal)
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


RELEASE_REASONS = {
	"returned": "no leader was up at its moment; the schedule's catch-up policy decides",
}
# A release whose queue refused the push keeps its fires prepared; it is tried again after this.
HELD_RETRY_SECONDS = 1.0
# Released outcomes kept in a site's recent fires.
RECORDED = ("enqueued", "skipped_overlap")


# Compiled specs and job shapes, by their stored JSON. Bounded, so memory stays
# flat however many schedules there are; a miss costs one JSON parse.
CACHE_SIZE = 10_000


@lru_cache(maxsize=CACHE_SIZE)
def load_spec(fingerprint: str, spec_json: str) -> ScheduleSpec:
	return ScheduleSpec.from_dict(json.loads(spec_json))


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


class Scheduler:
	def __init__(self, config: Config, bench_path: str | Path):
		self.config = config
		self.bench_path = bench_path
		self.process_id = f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:6]}"
		self.redis = config.redis(socket_timeout=10, socket_connect_timeout=3)
		self.clock = Clock()
		self.state = State(self.redis)
		self.lease = Lease(self.redis, self.process_id, config.lease_ttl_secs)
		self.reconciler = Reconciler(
			bench_path, self.state, config.executor, self.clock.now, self.publish_wake,
			audit_secs=AUDIT_EVERY * config.full_refresh_interval_secs,
		)
		self.wake = threading.Event()
		self.reconcile_due = threading.Event()
		self.started_at = datetime.now(timezone.utc)
		self.leader_since: datetime | None = None
		self.redis_down = False
		self.redis_error: str | None = None
		self.failed_at = 0.0
		self.backoff = 0.1
		bench_id = self.reconciler.bench.bench_id
		self.access = redis_acl.Access(self.redis, bench_id, self.process_id, "main")
		self.notify_access = redis_acl.Access(self.redis, bench_id, self.process_id, "notifier")
		self.reconcile_access = redis_acl.Access(self.redis, bench_id, self.process_id, "reconciler")
		self.renew_every = max(config.lease_ttl_secs / 3, 0.05)
		self.ahead_ms = round(config.prepare_ahead_secs * 1000)
		self.next_renew = 0.0
		self.next_check = 0.0  # when the leader next looks for fires to release or prepare
		self.held_until = 0.0  # a queue refused a push: not before this
		self.next_heartbeat = 0.0
		self.heartbeat_role: str | None = None
		self.next_status = 0.0
		self.load_shape = lru_cache(maxsize=CACHE_SIZE)(self._make_shape)

	def _make_shape(self, job_json: str, site: str) -> JobShape:
		return JobShape(self.redis, JobTemplate.from_dict(json.loads(job_json)), site)

	# -- process ----------------------------------------------------------------

	def run(self, stop: threading.Event) -> None:
		log_event(logger, logging.INFO, "scheduler_started", process=self.process_id, bench=str(self.bench_path), executor=self.config.executor)
		threads = [
			threading.Thread(target=self.notify_loop, args=(stop,), name="btu-notifier", daemon=True),
			threading.Thread(target=self.reconcile_loop, args=(stop,), name="btu-reconciler", daemon=True),
		]
		for thread in threads:
			thread.start()
		listener_redis = self.config.redis(socket_timeout=None, socket_connect_timeout=3)
		start_listener_thread(listener_redis, RpcDispatcher(self.reconciler), self.config, stop, process_id=self.process_id)
		try:
			while not stop.is_set():
				try:
					if self.lease.held:
						self.lead_once(stop)
					else:
						self.stand_by(stop)
					self.redis_ok()
				except REDIS_ERRORS as exc:  # NOPERM (grants revoked while running) is one
					self.redis_failed(exc, stop)
		finally:
			self.step_down("stopped")
			self.wake.set()
			log_event(logger, logging.INFO, "scheduler_stopped", process=self.process_id)

	def serve(self) -> None:
		"""Run until SIGTERM, SIGINT or SIGHUP; each releases the lease so a standby takes over at once."""
		stop = threading.Event()

		def request_stop(signum, frame):
			stop.set()
			self.wake.set()

		# SIGHUP too: a closed terminal or a process manager's reload must hand the lease over, not drop it.
		for signum in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
			signal.signal(signum, request_stop)
		# A moment's release must not wait out CPython's 5 ms GIL switch interval behind the
		# reconciler thread; the shorter interval costs nothing while no other thread runs.
		sys.setswitchinterval(SWITCH_INTERVAL_SECONDS)
		self.run(stop)

	def redis_ok(self) -> None:
		"""A loop went through. After an outage Redis is restored at once; after a refusal only once none
		has failed for RESTORED_AFTER_SECONDS: under a refusal some steps still pass (a lease renewal
		writes nothing new), and one such step must not make the next failure a new one to log."""
		self.access.ok()
		refused = self.redis_error is not None and not self.redis_error.startswith(OUTAGE_KINDS)
		if self.redis_down and (not refused or time.monotonic() - self.failed_at >= RESTORED_AFTER_SECONDS):
			self.redis_down = False
			self.redis_error = None
			log_event(logger, logging.INFO, "redis_restored", process=self.process_id)

	def redis_failed(self, exc: Exception, stop: threading.Event) -> None:
		"""Log once per kind of failure (a refused permission through `access`), then back off (capped at MAX_BACKOFF)."""
		self.failed_at = time.monotonic()
		if not (self.redis_down or self.access.reason):
			self.backoff = 0.1
		if protocol.is_denied(exc):
			# Redis answers but refuses this user (grants revoked, password changed): not an outage.
			self.access.denied(exc)
		else:
			kind = redis_failure(exc)
			if kind != self.redis_error:
				event = "redis_unreachable" if isinstance(exc, OUTAGES) else "redis_refused" if is_outage(exc) else "redis_error"
				# An error that is neither an outage nor a refusal is a wrong value no guard expected: its traceback says where.
				log_event(
					logger, logging.ERROR, event, exc_info=event == "redis_error", process=self.process_id,
					error=f"{type(exc).__name__}: {exc}", effect="retrying; missed fires follow each schedule's catch-up policy",
				)
			self.redis_down = True
			self.redis_error = kind
		stop.wait(self.backoff)
		self.backoff = min(self.backoff * 2, MAX_BACKOFF)

	def step_down(self, reason: str) -> None:
		if self.lease.held:
			try:
				self.lease.release()
			except REDIS_ERRORS:
				self.lease.lost()
			log_event(logger, logging.INFO, "leader_stepped_down", process=self.process_id, reason=reason)
		self.leader_since = None

	def publish_wake(self) -> None:
		try:
			self.redis.publish(protocol.WAKE_CHANNEL, self.process_id)
		except redis.RedisError:
			pass  # the leader still wakes at its next fire or renewal; the notifier reports a refused channel
		self.wake.set()

	def notify_loop(self, stop: threading.Event) -> None:
		backoff = 0.1
		while not stop.is_set():
			pubsub = None
			try:
				pubsub = self.config.redis(socket_timeout=None, socket_connect_timeout=3).pubsub(ignore_subscribe_messages=True)
				pubsub.subscribe(protocol.WAKE_CHANNEL, protocol.HANDOFF_CHANNEL)
				pubsub.get_message(timeout=1)  # SUBSCRIBE's reply: a refused channel raises here, not later
				self.notify_access.ok()
				backoff = 0.1
				self.wake.set()  # something may have changed while unsubscribed
				while not stop.is_set():
					if pubsub.get_message(timeout=NOTIFY_BLOCK_SECONDS):
						self.wake.set()
			except (*REDIS_ERRORS, redis.ResponseError, BenchError) as exc:  # BenchError: the bench's Redis settings are being edited; retry
				if protocol.is_denied(exc):
					self.notify_access.denied(exc)
				stop.wait(backoff)
				backoff = min(backoff * 2, MAX_BACKOFF)
			finally:
				if pubsub is not None:
					try:
						pubsub.close()
					except Exception:
						pass

	def reconcile_loop(self, stop: threading.Event) -> None:
		while not stop.is_set():
			self.reconcile_due.wait(self.config.full_refresh_interval_secs)
			self.reconcile_due.clear()
			if stop.is_set() or not self.lease.held:
				continue
			try:
				self.reconciler.full()
				self.publish_status()
				self.reconcile_access.ok()
			except Exception as exc:
				if protocol.is_denied(exc):
					self.reconcile_access.denied(exc)
				elif not is_outage(exc):  # the main loop reports outages and refusals
					log_event(logger, logging.ERROR, "reconcile_failed", exc_info=True, error=f"{type(exc).__name__}: {exc}")

	# -- standing by -------------------------------------------------------------------

	def stand_by(self, stop: threading.Event) -> None:
		if self.lease.acquire():
			self.leader_since = datetime.now(timezone.utc)
			self.next_renew = time.monotonic() + self.renew_every
			self.next_check = 0.0
			log_event(logger, logging.INFO, "leader_elected", process=self.process_id, epoch=self.lease.epoch)
			self.reconcile_due.set()
			self.heartbeat()
			return
		self.heartbeat()
		_, pttl = self.lease.current()
		wait = pttl / 1000 if pttl and pttl > 0 else 0.05
		self.wake.clear()
		self.wake.wait(min(wait + 0.005, self.config.lease_ttl_secs))

	# -- leading ---------------------------------------------------------------------------

	def lead_once(self, stop: threading.Event) -> None:
		if time.monotonic() >= self.next_renew:
			if not self.lease.renew():
				log_event(logger, logging.WARNING, "leader_lost_lease", process=self.process_id)
				self.leader_since = None
				return
			self.next_renew = time.monotonic() + self.renew_every
			self.heartbeat()
		if self.wake.is_set() or time.monotonic() >= self.next_check:
			self.wake.clear()
			if not self.release():
				return
			due = self.state.due(self.config.batch_size, self.ahead_ms)
			self.clock.sync(due.now_us / 1000)
			if due.moved_aside:
				self.reconcile_due.set()
			if due.entries:
				self.prepare(due.now_us // 1000, due.entries)
				self.next_check = 0.0  # more may be due
				return
			until = RECHECK_SECONDS
			if due.next_due_ms is not None:
				until = min(until, self.clock.seconds_until(due.next_due_ms - self.ahead_ms))
			if due.next_prepared_ms is not None:
				until = min(until, self.clock.seconds_until(due.next_prepared_ms))
			self.next_check = max(time.monotonic() + until, self.held_until)
		if time.monotonic() >= self.next_status:
			self.publish_status()
		sleep = min(self.next_renew, self.next_check) - time.monotonic()
		if sleep > 0:
			self.wake.wait(sleep)

	def release(self) -> bool:
		"""Release every prepared fire whose moment has come, then log them; False when fenced off."""
		done: list[Released] = []
		try:
			while True:
				released = self.state.release(self.lease.value or "", self.config.release_batch_size, round(self.config.misfire_grace_secs * 1000))
				if released is None:
					self.fenced()
					return False
				done += released
				if any(fire.outcome == "held" for fire in released):
					# Its queue refused the push: the fires stay prepared; try again in a moment, not at once.
					self.held_until = time.monotonic() + HELD_RETRY_SECONDS
					return True
				if len(released) < self.config.release_batch_size:
					return True
		finally:
			if done:
				self.state.record_fires([(fire.entry.site, fire.record()) for fire in done if fire.outcome in RECORDED])
				self.log_released(done)
				self.next_status = min(self.next_status, time.monotonic() + 5)

	def prepare(self, now_ms: int, entries: list[tuple[str, str, int]]) -> None:
		now = from_ms(now_ms)
		ahead = timedelta(milliseconds=self.ahead_ms)
		grace = timedelta(seconds=self.config.misfire_grace_secs)
		rows = self.state.read([(site, schedule) for site, schedule, _ in entries])
		created_at = self.clock.now()
		items: list[FireItem] = []
		for (site, schedule, _), row in zip(entries, rows):
			if isinstance(row, dict) and not row.get("cursor") and not row.get("spec"):
				self.redis.zrem(protocol.DUE_KEY, protocol.due_member(site, schedule))  # removed meanwhile
				continue
			try:
				spec, shape, cursor, runs = self.load_state(site, row)
			except ValueError as exc:
				self.quarantine_schedule(site, schedule, str(exc))
				continue
			try:
				plan = spec.plan(cursor, now, runs=runs, grace=grace, ahead=ahead)
				jobs = []
				for slot in plan.fire:
					fire_at = spec.fire_time(slot)
					description, data = shape.fire_fields(schedule, slot, fire_at)
					jobs.append(FireJob(to_ms(slot), to_ms(fire_at), job_id(site, schedule, slot), shape, description, data))
				finished = plan.finished or plan.next_cursor is None
				items.append(
					FireItem(
						site=site,
						schedule=schedule,
						expected_cursor=row["cursor"],
						next_cursor="" if finished else str(to_ms(plan.next_cursor)),
						next_fire_at="0" if finished else str(to_ms(spec.fire_time(plan.next_cursor))),
						overlap_skip=spec.overlap_policy == "skip",
						skipped=plan.skipped,
						expired=plan.expired,
						jobs=jobs,
					)
				)
			except Exception as exc:
				# A schedule that cannot be planned must not spin the loop: take it off the due set.
				log_event(logger, logging.ERROR, "fire_failed", exc_info=True, site=site, schedule=schedule, error=f"{type(exc).__name__}: {exc}")
				self.redis.zrem(protocol.DUE_KEY, protocol.due_member(site, schedule))
				self.state.set_invalid(site, {schedule: f"cannot be fired: {type(exc).__name__}: {exc}"}, replace=False)
		if not items:
			return
		result = self.state.prepare(self.lease.value or "", rq_time(created_at), round(self.config.misfire_grace_secs * 1000), items)
		if result is None:
			self.fenced()
			return
		now_ms, outcomes = result
		duplicates = [
			(item, job) for item, outcome in zip(items, outcomes)
			for job, job_outcome in zip(item.jobs, outcome.jobs) if job_outcome == "duplicate"
		]
		if duplicates:
			self.state.record_fires([
				(item.site, fire_record(item.schedule, job.slot_ms, now_ms, now_ms - job.fire_at_ms, job.job_id, "duplicate"))
				for item, job in duplicates
			])
		if any(outcome.outcome == CORRUPT for outcome in outcomes):
			self.reconcile_due.set()
		self.log_prepared(items, outcomes)

	def load_state(self, site: str, row: dict | Exception) -> tuple:
		"""(spec, job shape, cursor, runs) from a schedule's state; ValueError naming what is wrong in it."""
		if isinstance(row, Exception):
			raise ValueError(str(row))
		cursor, runs = row.get("cursor") or "", row.get("runs") or "0"
		if not cursor.isdigit() or not runs.lstrip("-").isdigit():
			raise ValueError(f"cursor {cursor[:40]!r} or runs {runs[:40]!r} is not a number")
		try:
			spec = load_spec(row["fingerprint"], row["spec"])
			shape = self.load_shape(row["job"], site)
		except (ValueError, TypeError, KeyError, AttributeError) as exc:
			raise ValueError(f"spec or job is not what the reconcile writes: {type(exc).__name__}: {str(exc)[:200]}") from exc
		try:
			return spec, shape, from_ms(cursor), int(runs)
		except OverflowError as exc:
			raise ValueError(f"cursor {cursor[:40]!r} is out of range") from exc

	def quarantine_schedule(self, site: str, schedule: str, reason: str) -> None:
		"""Its state held a wrong value: moved aside, and rebuilt from its row by the reconcile, woken now."""
		self.state.quarantine(protocol.schedule_key(site, schedule), reason, site=site, schedule=schedule)
		log_event(logger, logging.ERROR, "state_quarantined", site=site, schedule=schedule, reason=reason, effect="rebuilt from its database row")
		self.reconcile_due.set()

	def fenced(self) -> None:
		self.lease.lost()
		self.leader_since = None
		log_event(logger, logging.WARNING, "leader_fenced", process=self.process_id, reason="another process holds the lease; nothing was enqueued")

	def log_prepared(self, items: list[FireItem], outcomes: list[ItemResult]) -> None:
		for item, outcome in zip(items, outcomes):
			if outcome.outcome == CORRUPT:
				log_event(logger, logging.ERROR, "state_quarantined", site=item.site, schedule=item.schedule, reason="its state is not a hash", effect="rebuilt from its database row")
				continue
			if outcome.outcome == FAILED:
				log_event(logger, logging.ERROR, "prepare_failed", site=item.site, schedule=item.schedule, error=outcome.error, effect="its slot stays unclaimed; tried again")
				continue
			if not logger.isEnabledFor(logging.INFO):
				continue
			if outcome.outcome == STALE:
				log_event(logger, logging.INFO, "fire_stale", site=item.site, schedule=item.schedule, reason="its slot moved meanwhile (edited, or fired by another leader)")
				continue
			for job, job_outcome in zip(item.jobs, outcome.jobs):
				if job_outcome == "duplicate":
					log_event(
						logger, logging.INFO, "duplicate", site=item.site, schedule=item.schedule, slot=slot_text(from_ms(job.slot_ms)),
						job_id=job.job_id, reason="a job of this id exists already",
					)
			if item.skipped or item.expired:
				log_event(logger, logging.INFO, "missed", site=item.site, schedule=item.schedule, skipped=item.skipped, expired=item.expired)
			if not item.next_cursor:
				log_event(logger, logging.INFO, "schedule_finished", site=item.site, schedule=item.schedule)

	def log_released(self, released: list[Released]) -> None:
		for fire in released:
			if fire.outcome in ("quarantined", "held"):
				# Never parsed: a quarantined member may be anything.
				log_event(
					logger, logging.ERROR, "fire_" + fire.outcome, member=text(fire.member)[:200], reason=fire.reason,
					effect="moved aside; see btu-scheduler status" if fire.outcome == "quarantined" else "kept prepared; tried again",
				)
				continue
			if not logger.isEnabledFor(logging.INFO):
				continue
			entry = fire.entry
			extra = {"reason": RELEASE_REASONS[fire.outcome]} if fire.outcome in RELEASE_REASONS else {}
			log_event(
				logger, logging.INFO, "fire" if fire.outcome == "enqueued" else fire.outcome, site=entry.site, schedule=entry.schedule,
				slot=slot_text(from_ms(entry.slot_ms)), lag_ms=fire.lag_ms, job_id=entry.job_id, **extra,
			)

	# -- observability -------------------------------------------------------------------------

	def heartbeat(self) -> None:
		"""Say this process is alive: every HEARTBEAT_SECONDS, and at once when its role changed."""
		role = "leader" if self.lease.held else "standby"
		if role == self.heartbeat_role and time.monotonic() < self.next_heartbeat:
			return
		status.write_heartbeat(
			self.redis,
			self.process_id,
			role=role,
			started_at=self.started_at,
			leader_since=self.leader_since,
			ttl_secs=max(self.config.lease_ttl_secs * 3, 15),
		)
		self.heartbeat_role = role
		self.next_heartbeat = time.monotonic() + HEARTBEAT_SECONDS

	def publish_status(self) -> None:
		self.next_status = time.monotonic() + 30
		status.publish(self.redis, self.reconciler)


def redis_failure(exc: Exception) -> str:
	"""What kind of failure `exc` is, to log each kind once: "outage:" or "refusal:", its class and the error code Redis sent."""
	code = str(exc).split(" ", 1)[0]
	return f"{'outage' if isinstance(exc, OUTAGES) else 'refusal'}:{type(exc).__name__}:{code if code.isupper() else ''}"



def is_outage(exc: Exception) -> bool:
	"""Redis down, or refusing every write (out of memory, a read-only replica, loading): not a wrong value nor a bug."""
	return isinstance(exc, (*OUTAGES, *REFUSALS)) or str(exc).split(" ", 1)[0] in REFUSAL_CODES
