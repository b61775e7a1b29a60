"""One module per `btu-scheduler` subcommand.

Each module defines `register(subparsers)`, which adds its parser and sets
`handler` (a function taking the parsed args and returning an exit code).
"""

# The order is the order `btu-scheduler --help` lists them in. Planned: run,
# status, ping, resync, next, config, dev_bench, demo, setup.
SUBCOMMANDS: tuple[str, ...] = ("run", "status", "ping", "resync", "config", "dev_bench", "demo", "next", "setup")
