"""One module per `btu-scheduler` subcommand.

Each module says what it is and `register` makes its parser from that:

- `NAME`, `HELP` (one line for `btu-scheduler --help`), `DESCRIPTION`;
- `FRAPPE_BENCH`: whether its `--bench` names the Frappe bench (`bench btu-scheduler X` passes the
  bench it runs in to those, `btu.commands`);
- `arguments(parser)`, adding its own flags; `run(args)`, returning an exit code.

Exit codes: 0 success; 1 the operation failed (scheduler unreachable, a
service down); 2 bad input (usage, expression, zone, configuration, and a
Redis user that lacks BTU's grants: `btu-scheduler setup redis-acl`).
"""

from __future__ import annotations

import argparse
import importlib
from types import ModuleType

EXIT_OK = 0
EXIT_FAILED = 1
EXIT_BAD_INPUT = 2
# The order `btu-scheduler --help` lists them in.
# The dev bench and the demo are the dev tooling's (`python -m devbench bench|demo`), not the product's.
SUBCOMMANDS: tuple[str, ...] = ("run", "status", "ping", "resync", "config", "next", "setup")


def module(name: str) -> ModuleType:
	"""The module of subcommand `name` (dashes or underscores); KeyError for an unknown one."""
	name = name.replace("-", "_")
	if name not in SUBCOMMANDS:
		raise KeyError(name)
	return importlib.import_module(f"{__name__}.{name}")


def register(subparsers, command: ModuleType) -> argparse.ArgumentParser:
	"""Add one subcommand's parser, with `handler` set to its `run`."""
	parser = subparsers.add_parser(command.NAME, help=command.HELP, description=command.DESCRIPTION)
	command.arguments(parser)
	parser.set_defaults(handler=command.run)
	return parser


def takes_frappe_bench(name: str) -> bool:
	"""Whether subcommand `name` has a `--bench` naming the Frappe bench."""
	try:
		return module(name).FRAPPE_BENCH
	except KeyError:
		return False
