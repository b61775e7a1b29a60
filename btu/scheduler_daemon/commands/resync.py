"""`btu-scheduler resync`: reconcile the state with the databases now."""

from __future__ import annotations

import sys
from datetime import datetime, timezone

from btu.scheduler_daemon.commands import EXIT_BAD_INPUT, EXIT_FAILED, EXIT_OK
from btu.scheduler_daemon.log import configure
from btu.scheduler_daemon.operations import redis_acl
from btu.scheduler_daemon.operations.config import ConfigError, add_config_flags, load_config
from btu.scheduler_daemon.reads.bench import BenchError
from btu.scheduler_daemon.reconcile.reconciler import Reconciler
from btu.scheduler_daemon.rpc.dispatcher import RpcDispatcher
from btu.scheduler_daemon.rpc.listener import CommandRejected
from btu.scheduler_daemon.store.state import State
from btu.shared.redis_refusals import is_denied

NAME = "resync"
HELP = "read schedules from the databases into the scheduler's state now"
DESCRIPTION = (
	"Reconcile every site (or one site, or one schedule) from its database into Redis and wake the "
	"leader. Runs in this process: no scheduler needs to answer."
)
FRAPPE_BENCH = True


def arguments(parser) -> None:
	parser.add_argument("--site", help="only this site")
	parser.add_argument("--schedule", help="only this BTU Task Schedule (needs --site on a bench with several sites)")
	add_config_flags(parser)


def utc_now() -> datetime:
	return datetime.now(timezone.utc)


def run(args) -> int:
	try:
		config = load_config(args)
		configure(config.log_level, config.log_format)
		bench = config.load_bench()
		keys = bench.keys
		client = config.redis(socket_connect_timeout=5)
	except (ConfigError, BenchError, ValueError) as exc:
		print(f"btu-scheduler resync: {exc}", file=sys.stderr)
		return EXIT_BAD_INPUT

	def wake() -> None:
		client.publish(keys.wake_channel, "resync")

	reconciler = Reconciler(
		bench.path, State(client, keys), config.executor, utc_now, wake, connections=config.connections()
	)
	try:
		if args.schedule or args.site:
			site = RpcDispatcher(reconciler).resolve_site(args.site)
			if args.schedule:
				reconciler.sync(site, [args.schedule])
			else:
				reconciler.sync_site(site)
		else:
			reconciler.full()
	except CommandRejected as exc:
		print(f"btu-scheduler resync: {exc}", file=sys.stderr)
		return EXIT_BAD_INPUT
	except Exception as exc:
		if is_denied(exc):
			print(
				f"btu-scheduler resync: {redis_acl.missing_grant(client, keys, bench.bench_id, exc)}", file=sys.stderr
			)
			return EXIT_BAD_INPUT
		print(f"btu-scheduler resync: {type(exc).__name__}: {exc}", file=sys.stderr)
		return EXIT_FAILED
	print(f"resynced {args.schedule or args.site or 'all sites'}")
	return EXIT_OK
