"""The scheduler's side of the Redis RPC protocol (`btu.shared.protocol`).

`CommandListener.run` BRPOPs ``btu:scheduler:commands`` (and takes the commands
already waiting behind it with RPOP count). For a valid command it LPUSHes the
receipt ACK on the command's response key and EXPIREs that key (60 s) first,
then has a `Dispatcher` carry it out. Both schedule commands mean "bring this
schedule in line with its row", so a batch is carried out once per site, for
each schedule it names once, however many commands named it: a flood costs
one reconcile per site per batch. A command that cannot be used is logged in
one line (at most `REJECTION_LOG_LIMIT` lines per `REJECTION_LOG_WINDOW`,
then one line counting the rest) and, when it carries a valid response key,
answered with ``{"status": "error", ...}`` there. The listener writes nowhere
but the command list it pops (moved aside if it holds the wrong type) and
response keys ``btu:scheduler:rpc:*``, and nothing a caller sends stops
it: it only stops when its `stop` event is set.
"""

from __future__ import annotations

import json
import logging
import os
import socket
import threading
import time
from collections.abc import Callable
from typing import Any, Protocol

import redis

from btu.scheduler_daemon.log import log_event
from btu.scheduler_daemon.operations.metrics import Metrics
from btu.scheduler_daemon.store import scripts
from btu.shared import protocol
from btu.shared.keys import Keys
from btu.shared.protocol import Command, Rejection, clip, parse_command
from btu.shared.redis_refusals import denied_message, is_denied, redis_user

logger = logging.getLogger(__name__)

# Idle, the listener wakes once per block; a command ends the block at once.
BLOCK_SECONDS = 5.0
BACKOFF_FIRST_SECONDS = 0.1
BACKOFF_MAX_SECONDS = 5.0
# After BRPOP returns, up to this many more waiting commands are taken with RPOP count
# (Redis 6.2+), so a burst is ACKed in one round trip per batch instead of two per command.
DRAIN_COUNT = 100
# A flood of bad commands must not become a flood of log lines: this many rpc_rejected lines per
# window, then one rpc_rejected_suppressed line with the count.
REJECTION_LOG_LIMIT = 20
REJECTION_LOG_WINDOW = 10.0


class CommandRejected(Exception):
	"""A command that cannot be executed; the message is the reason sent back to the caller."""


class Dispatcher(Protocol):
	"""What the listener needs from the engine."""

	def resolve_site(self, site: str | None) -> str:
		"""The site a command applies to; raises `CommandRejected` for an unknown or ambiguous site."""

	def check_targets(self, site: str, request_type: str, names: list[str]) -> dict[str, str]:
		"""The names that are not schedules of `site`, each with the reason it is refused; the rest are accepted."""

	def execute(self, site: str, names: list[str]) -> None:
		"""Bring these schedules of `site` in line with their rows, after their ACKs; may be slow."""


def default_process_id() -> str:
	return f"{socket.gethostname()}:{os.getpid()}"


def effective_socket_timeout(redis_client: redis.Redis) -> float | None:
	"""The socket timeout the client's connections get: the given one, else the library's default
	(none in redis-py 4, 5 s in redis-py 8). A connection object is only built, not connected."""
	pool = redis_client.connection_pool
	return getattr(pool.connection_class(**pool.connection_kwargs), "socket_timeout", None)


class RejectionLog:
	"""The rpc_rejected lines: at most `limit` a `window` seconds, then one rpc_rejected_suppressed for the rest."""

	def __init__(self, process_id: str, limit: int, window: float):
		self.process_id = process_id
		self.limit = limit
		self.window = window
		self.logged = 0
		self.suppressed = 0
		self.window_start = time.monotonic()

	def log(self, reason: str, replied: bool, **context: Any) -> None:
		self.end_window()
		if self.logged < self.limit:
			self.logged += 1
			log_event(
				logger,
				logging.WARNING,
				"rpc_rejected",
				reason=reason,
				replied=replied,
				process=self.process_id,
				**context,
			)
		else:
			self.suppressed += 1

	def end_window(self) -> None:
		"""Once the window is over: one line counting the rejections it did not log, and a new window."""
		now = time.monotonic()
		if now - self.window_start < self.window:
			return
		if self.suppressed:
			log_event(
				logger,
				logging.WARNING,
				"rpc_rejected_suppressed",
				count=self.suppressed,
				window_secs=self.window,
				logged=self.logged,
				process=self.process_id,
			)
		self.logged = self.suppressed = 0
		self.window_start = now


class CommandListener:
	"""Serves `btu:scheduler:commands` until `stop` is set; meant to run in its own thread."""

	def __init__(
		self,
		redis_client: redis.Redis,
		keys: Keys,
		dispatcher: Dispatcher,
		*,
		process_id: str | None = None,
		block_seconds: float = BLOCK_SECONDS,
		drain_count: int = DRAIN_COUNT,
		rejection_log_limit: int = REJECTION_LOG_LIMIT,
		rejection_log_window: float = REJECTION_LOG_WINDOW,
		metrics: Metrics | None = None,
	):
		if redis_client.connection_pool.connection_kwargs.get("decode_responses"):
			raise ValueError(
				"CommandListener needs a Redis client with decode_responses=False: a command may be any bytes"
			)
		self.redis = redis_client
		self.keys = keys
		self.dispatcher = dispatcher
		self.process_id = process_id or default_process_id()
		# BRPOP must return before the client's own socket timeout would cut it.
		socket_timeout = effective_socket_timeout(redis_client)
		if socket_timeout:
			block_seconds = min(block_seconds, socket_timeout / 2)
		self.block_seconds = block_seconds
		self.drain_count = drain_count
		self.redis_down = False
		self.quarantine_script = scripts.register(redis_client, keys, "quarantine")
		self.rejections = RejectionLog(self.process_id, rejection_log_limit, rejection_log_window)
		self.metrics = metrics or Metrics()

	def run(self, stop: threading.Event) -> None:
		log_event(logger, logging.INFO, "rpc_listener_started", process=self.process_id, key=self.keys.commands)
		backoff = BACKOFF_FIRST_SECONDS
		while not stop.is_set():
			try:
				popped = self.redis.brpop([self.keys.commands], timeout=self.block_seconds)
			except Exception as exc:  # redis.RedisError, or anything else a broken connection raises
				if str(exc).startswith("WRONGTYPE"):
					# The command list held another type: moved aside, so that callers are heard again.
					self.quarantine(self.keys.commands, str(exc))
					continue
				self.note_redis_lost(exc)
				stop.wait(backoff)
				backoff = min(backoff * 2, BACKOFF_MAX_SECONDS)
				continue
			backoff = BACKOFF_FIRST_SECONDS
			self.note_redis_restored()
			if popped is not None:
				self.handle([popped[1], *self.drain()])
			self.rejections.end_window()
		log_event(logger, logging.INFO, "rpc_listener_stopped", process=self.process_id)

	def quarantine(self, key: str, reason: str) -> None:
		"""Move a key holding a wrong value aside (lua/guard.lua), logged; if that fails, the next BRPOP reports it."""
		try:
			self.quarantine_script(keys=[key, self.keys.due], args=[reason, ""])
			self.metrics.quarantine("command_list")
			log_event(
				logger, logging.ERROR, "rpc_commands_quarantined", key=key, reason=reason, process=self.process_id
			)
		except redis.RedisError as exc:
			self.note_redis_lost(exc)

	def note_redis_lost(self, exc: Exception) -> None:
		if not self.redis_down:
			self.redis_down = True
			if is_denied(exc):  # the listener touches only btu: keys
				error = denied_message(exc, redis_user(self.redis), self.keys.grant)
			else:
				error = f"{type(exc).__name__}: {exc}"
			log_event(
				logger,
				logging.ERROR,
				"rpc_redis_lost",
				process=self.process_id,
				error=error,
				retry="backing off up to 5 s",
			)

	def note_redis_restored(self) -> None:
		if self.redis_down:
			self.redis_down = False
			log_event(logger, logging.INFO, "rpc_redis_restored", process=self.process_id)

	def drain(self) -> list[bytes]:
		"""More commands already waiting, without blocking."""
		if self.drain_count <= 1:
			return []
		try:
			return self.redis.rpop(self.keys.commands, self.drain_count - 1) or []
		except redis.ResponseError as exc:  # Redis before 6.2 has no RPOP count
			self.drain_count = 1
			log_event(logger, logging.INFO, "rpc_drain_unsupported", process=self.process_id, error=str(exc))
		except Exception as exc:  # the next BRPOP notices a lost connection
			log_event(
				logger,
				logging.WARNING,
				"rpc_drain_failed",
				process=self.process_id,
				error=f"{type(exc).__name__}: {exc}",
			)
		return []

	def handle(self, raws: list[bytes | str]) -> None:
		"""Popped commands: every reply (ACK or error) first, in one round trip, then the executions. Never raises."""
		outcomes: list[Command | Rejection] = []
		for raw in raws:
			try:
				outcomes.append(parse_command(raw, self.keys, self.reject))
			except Exception as exc:  # a bug must cost one command, not the listener
				self.metrics.rpc_command(None, "crashed")
				log_event(
					logger,
					logging.ERROR,
					"rpc_command_crashed",
					exc_info=True,
					process=self.process_id,
					error=f"{type(exc).__name__}: {exc}",
				)
		outcomes = self.check(outcomes)
		for outcome in outcomes:
			if isinstance(outcome, Command):
				self.metrics.rpc_command(outcome.request_type, "accepted")
			else:
				self.metrics.rpc_command(outcome.reply.get("request_type"), "rejected")
		self.send_replies([outcome for outcome in outcomes if outcome.response_key is not None])
		# A valid command already popped is carried out even if its ACK could not be written. Each site
		# goes at the place of its last command, so whatever is executed after a command is also after it.
		syncs: dict[str, dict[str, None]] = {}
		counts: dict[str, int] = {}
		for outcome in outcomes:
			if isinstance(outcome, Command) and outcome.name is not None:
				names = syncs.pop(outcome.site, {})
				names[outcome.name] = None
				syncs[outcome.site] = names
				counts[outcome.site] = counts.get(outcome.site, 0) + 1
		for site, names in syncs.items():
			self.execute(site, list(names), counts[site])

	def send_replies(self, outcomes: list[Command | Rejection]) -> None:
		"""LPUSH each reply on its response key, then EXPIRE that key, all in one MULTI.

		Keys and replies are encoded first, so one that cannot be encoded costs its own reply only,
		not the whole batch's."""
		if not outcomes:
			return
		sent: list[Command | Rejection] = []
		with self.redis.pipeline(transaction=True) as pipe:
			for outcome in outcomes:
				try:
					key = outcome.response_key.encode("utf-8")
					reply = json.dumps(outcome.reply).encode("utf-8")
				except Exception as exc:
					self.note_reply_failed(outcome, exc)
					continue
				pipe.lpush(key, reply)
				pipe.expire(key, protocol.RESPONSE_TTL_SECONDS)
				sent.append(outcome)
			if not sent:
				return
			try:
				results = pipe.execute(raise_on_error=False)
			except Exception as exc:
				results = [exc] * (2 * len(sent))
		for outcome, result in zip(sent, results[::2]):
			if isinstance(result, Exception):
				self.note_reply_failed(outcome, result)

	def note_reply_failed(self, outcome: Command | Rejection, error: Exception) -> None:
		command = outcome if isinstance(outcome, Command) else None
		log_event(
			logger,
			logging.ERROR,
			"rpc_ack_failed" if command else "rpc_reply_failed",
			request_type=outcome.reply.get("request_type"),
			site=command.site if command else None,
			schedule=command.name if command else None,
			response_key=clip(outcome.response_key),
			error=f"{type(error).__name__}: {clip(str(error), 200)}",
			process=self.process_id,
		)

	def check(self, outcomes: list[Command | Rejection]) -> list[Command | Rejection]:
		"""Resolve each schedule command's site and check its target, refusing the ones that fail.

		One dispatcher call per site field and one per (site, request type) in the batch, not one per
		command: a flood costs a few database queries per batch."""
		targeted = [outcome for outcome in outcomes if isinstance(outcome, Command) and outcome.name is not None]
		sites: dict[str | None, str | Exception] = {}
		groups: dict[tuple[str, str], dict[str, None]] = {}
		for command in targeted:
			if command.site not in sites:
				try:
					sites[command.site] = self.dispatcher.resolve_site(command.site)
				except CommandRejected as exc:
					sites[command.site] = exc
				except Exception as exc:
					self.note_check_failed(exc, site=clip(command.site) if command.site is not None else None)
					sites[command.site] = exc
			resolved = sites[command.site]
			if isinstance(resolved, str):
				groups.setdefault((resolved, command.request_type), {})[command.name] = None
		reasons: dict[tuple[str, str], dict[str, str] | Exception] = {}
		for (site, request_type), names in groups.items():
			try:
				reasons[site, request_type] = self.dispatcher.check_targets(site, request_type, list(names))
			except Exception as exc:
				self.note_check_failed(exc, site=site, request_type=request_type, schedules=len(names))
				reasons[site, request_type] = exc
		checked = {id(command): command for command in targeted}
		for command in targeted:
			resolved = sites[command.site]
			found = reasons.get((resolved, command.request_type)) if isinstance(resolved, str) else resolved
			if isinstance(found, dict):
				reason = found.get(command.name)
			elif isinstance(found, CommandRejected):
				reason = str(found)
			else:
				reason = (
					f"{command.request_type} {command.name!r}: the scheduler could not check it "
					f"({type(found).__name__}: {clip(str(found), 200)}); try again"
				)
			if reason is None:
				command.site = resolved
			else:
				checked[id(command)] = self.reject(
					reason, response_key=command.response_key, reply_type=command.request_type, **self.context(command)
				)
		return [checked.get(id(outcome), outcome) for outcome in outcomes]

	def context(self, command: Command) -> dict:
		return {
			"request_type": command.request_type,
			"site": clip(command.site) if command.site is not None else None,
			"schedule": clip(command.name),
			"size": command.size,
		}

	def note_check_failed(self, error: Exception, **context: Any) -> None:
		"""Once per failed dispatcher call; each command it covered is refused with "try again"."""
		log_event(
			logger,
			logging.ERROR,
			"rpc_check_failed",
			exc_info=error,
			process=self.process_id,
			error=f"{type(error).__name__}: {clip(str(error), 200)}",
			**context,
		)

	def reject(
		self, reason: str, *, response_key: str | None = None, reply_type: str | None = None, **context: Any
	) -> Rejection:
		"""Log why a command is refused (rate-limited); the reply goes to `response_key` only (checked, or None)."""
		self.rejections.log(reason, response_key is not None, **context)
		return Rejection(response_key, protocol.make_error(reason, reply_type))

	def execute(self, site: str, names: list[str], commands: int) -> None:
		schedules = clip(", ".join(names), 200)
		log_event(
			logger,
			logging.INFO,
			"rpc_sync",
			site=site,
			schedules=schedules,
			count=len(names),
			commands=commands,
			process=self.process_id,
		)
		try:
			self.dispatcher.execute(site, names)
		except CommandRejected as exc:
			log_event(
				logger,
				logging.WARNING,
				"rpc_execute_refused",
				site=site,
				schedules=schedules,
				reason=str(exc),
				process=self.process_id,
			)
		except Exception as exc:
			log_event(
				logger,
				logging.ERROR,
				"rpc_execute_failed",
				exc_info=True,
				site=site,
				schedules=schedules,
				error=f"{type(exc).__name__}: {exc}",
				process=self.process_id,
			)


def start_listener_thread(
	redis_client: redis.Redis,
	keys: Keys,
	dispatcher: Dispatcher,
	config,
	stop: threading.Event,
	*,
	process_id: str | None = None,
	metrics: Metrics | None = None,
) -> threading.Thread | None:
	"""Start a daemon thread serving RPC commands, or log why not and return None."""
	if config.disable_redis_rpc:
		log_event(
			logger,
			logging.WARNING,
			"rpc_listener_disabled",
			reason="disable_redis_rpc = true: the Desk's buttons and btu-scheduler ping get no answer",
			source=config.sources.get("disable_redis_rpc", "default"),
		)
		return None
	listener = CommandListener(redis_client, keys, dispatcher, process_id=process_id, metrics=metrics)
	thread = threading.Thread(target=listener.run, args=(stop,), name="btu-rpc-listener", daemon=True)
	thread.start()
	return thread
