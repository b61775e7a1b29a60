"""`python -m devbench`: the dev tooling's command line, run from the repository root.

- `python -m devbench bench DIR [--site NAME ...] [--app NAME=DIR ...] [--drop]`: make (or drop) a dev bench;
- `python -m devbench demo [--keep] [--bench DIR] [--redis-url URL]`: README command one's demo.

Each command is a module (`bench_command`, `demo`) declaring NAME, HELP, DESCRIPTION, `arguments(parser)`
and `run(args)`, as the scheduler's own commands do (btu.scheduler_daemon.commands). Exit codes are the
scheduler's: 0 success, 1 the operation failed, 2 bad input.
"""

from __future__ import annotations

import argparse
import sys

from devbench import bench_command, demo

COMMANDS = (bench_command, demo)


def build_parser() -> argparse.ArgumentParser:
	parser = argparse.ArgumentParser(
		prog="python -m devbench",
		description="BTU's dev tooling: dev benches (a bench layout and BTU's tables without Frappe) and the demo.",
	)
	subparsers = parser.add_subparsers(dest="command", metavar="COMMAND")
	subparsers.required = True
	for command in COMMANDS:
		sub = subparsers.add_parser(command.NAME, help=command.HELP, description=command.DESCRIPTION)
		command.arguments(sub)
		sub.set_defaults(handler=command.run)
	return parser


def main(argv: list[str] | None = None) -> int:
	args = build_parser().parse_args(argv)
	try:
		return int(args.handler(args) or 0)
	except KeyboardInterrupt:
		return 130


if __name__ == "__main__":
	sys.exit(main())
