"""`btu-scheduler run`: the scheduler process (the main job of a bench)."""

from __future__ import annotations

import sys

from btu.scheduler_daemon.bench import BenchError
from btu.scheduler_daemon.cli import EXIT_BAD_INPUT, EXIT_OK
from btu.scheduler_daemon.config import ConfigError, add_config_flags, load_config
from btu.scheduler_daemon.log import configure


def register(subparsers) -> None:
	parser = subparsers.add_parser(
		"run",
		help="run the scheduler for every BTU site of the bench (until SIGTERM or Ctrl-C)",
		description=(
			"Fire every enabled BTU Task Schedule of every site of the bench into the sites' RQ queues. "
			"Run as many as you like against one Redis: one leads, the others stand by. SIGTERM and SIGINT "
			"release the lease so a standby takes over at once."
		),
	)
	add_config_flags(parser)
	parser.set_defaults(handler=run)


def run(args) -> int:
	try:
		config = load_config(args)
		configure(config.log_level, config.log_format)
		bench = config.load_bench()
	except (ConfigError, BenchError) as exc:
		print(f"btu-scheduler run: {exc}", file=sys.stderr)
		return EXIT_BAD_INPUT
	from btu.scheduler_daemon.engine import Scheduler

	Scheduler(config, bench.path).serve()
	return EXIT_OK
