"""`btu-scheduler ping`: ask the scheduler for its receipt ACK over Redis RPC."""

from __future__ import annotations

import json
import sys

import redis

from btu.scheduler_daemon.commands import EXIT_BAD_INPUT, EXIT_FAILED, EXIT_OK
from btu.scheduler_daemon.operations.config import ConfigError, add_config_flags, load_config
from btu.scheduler_daemon.reads.bench import BenchError
from btu.shared import protocol
from btu.shared.redis_urls import mask_url, redis_address

NAME = "ping"
HELP = "check that a scheduler answers on Redis RPC"
DESCRIPTION = (
	"Send a ping command on btu:scheduler:commands and wait up to 5 s for the scheduler's receipt ACK. "
	"Prints the ACK and the round trip. Exit 0 answered, 1 no answer (scheduler unreachable) or "
	"Redis down, 2 bad configuration or Redis refused the user (see setup redis-acl)."
)
FRAPPE_BENCH = True


def arguments(parser) -> None:
	parser.add_argument("--site", help="site the ping names (optional; a ping needs no site)")
	add_config_flags(parser)


def run(args) -> int:
	try:
		config = load_config(args)
		keys = config.keys()
		# Longer than the BLPOP, or redis-py 5+ (socket_timeout 5 by default) cuts the wait short.
		client = config.redis(socket_connect_timeout=5, socket_timeout=protocol.CALLER_TIMEOUT_SECONDS + 5)
	except (ConfigError, BenchError, ValueError) as exc:
		print(f"btu-scheduler ping: {exc}", file=sys.stderr)
		return EXIT_BAD_INPUT
	try:
		reply = protocol.call(client, keys, protocol.PING, site=args.site)
	except redis.RedisError as exc:
		where = mask_url(config.redis_url) if config.redis_url else redis_address(client)
		print(
			f"btu-scheduler ping: Redis at {where} is not answering ({exc}); start it or fix redis_url", file=sys.stderr
		)
		return EXIT_FAILED
	finally:
		client.close()
	if reply.outcome == "denied":
		print(f"btu-scheduler ping: {reply.message}", file=sys.stderr)
		return EXIT_BAD_INPUT
	if reply.outcome == "unreachable":
		print(
			f"btu-scheduler ping: no answer after {reply.round_trip_ms / 1000:.1f} s. {reply.message}", file=sys.stderr
		)
		return EXIT_FAILED
	print(json.dumps(reply.payload) if reply.payload is not None else reply.message)
	print(f"round trip: {reply.round_trip_ms:.2f} ms")
	return EXIT_OK if reply.ok else EXIT_FAILED
