"""`btu-scheduler`: the scheduler's command line.

Exit codes: 0 success; 1 the operation failed (scheduler unreachable, a
service down); 2 bad input (usage, expression, zone, configuration, and a
Redis user that lacks BTU's grants: `btu-scheduler setup redis-acl`).
"""

from __future__ import annotations

import argparse
import sys

from btu import __version__
from btu.scheduler_daemon import commands

EXIT_OK = 0
EXIT_FAILED = 1
EXIT_BAD_INPUT = 2


def build_parser() -> argparse.ArgumentParser:
	parser = argparse.ArgumentParser(
		prog="btu-scheduler",
		description="BTU scheduler: fires BTU Task Schedules of every site of a Frappe bench into RQ.",
	)
	parser.add_argument("--version", action="version", version=f"btu-scheduler {__version__}")
	subparsers = parser.add_subparsers(dest="command", metavar="COMMAND")
	subparsers.required = True
	for name in commands.SUBCOMMANDS:
		commands.register(subparsers, commands.module(name))
	return parser


def main(argv: list[str] | None = None) -> int:
	parser = build_parser()
	args = parser.parse_args(argv)
	try:
		return int(args.handler(args) or EXIT_OK)
	except KeyboardInterrupt:
		return 130


if __name__ == "__main__":
	sys.exit(main())
