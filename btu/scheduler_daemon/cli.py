"""`btu-scheduler`: the scheduler's command line (its subcommands and exit codes: `commands/`)."""

from __future__ import annotations

import argparse
import sys

from btu import __version__
from btu.scheduler_daemon import commands
from btu.scheduler_daemon.commands import EXIT_OK


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
