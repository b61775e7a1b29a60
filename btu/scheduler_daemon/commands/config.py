"""`btu-scheduler config`: the effective configuration and where each value came from."""

from __future__ import annotations

import json
import sys
from typing import Any

from btu.scheduler_daemon.commands import EXIT_BAD_INPUT, EXIT_OK
from btu.scheduler_daemon.operations.config import Config, ConfigError, add_config_flags, load_config

NAME = "config"
HELP = "print the effective configuration, each key with its source"
DESCRIPTION = (
	"Print every configuration key with its effective value and where it came from "
	"(flag > BTU_SCHEDULER_<KEY> > file > default). Secrets are masked. Exit 2 on a bad configuration."
)
FRAPPE_BENCH = True


def arguments(parser) -> None:
	parser.add_argument("--json", action="store_true", help="print JSON instead of TOML-like lines")
	add_config_flags(parser)


def toml_value(value: Any) -> str:
	if isinstance(value, bool):
		return "true" if value else "false"
	if isinstance(value, str):
		return json.dumps(value)
	if isinstance(value, (list, tuple)):
		return "[" + ", ".join(toml_value(item) for item in value) + "]"
	return str(value)


def render_text(config: Config) -> str:
	state = "loaded" if config.config_file_found else "not found, so not used"
	lines = [f"# configuration file: {config.config_file} ({state})"]
	rows = []
	for key, value in config.masked_values().items():
		setting = f"{key} = {toml_value(value)}" if value is not None else f"# {key} is not set"
		rows.append((setting, config.sources[key]))
	width = max(len(setting) for setting, _ in rows)
	lines.extend(f"{setting.ljust(width)}  # {source}" for setting, source in rows)
	return "\n".join(lines)


def render_json(config: Config) -> str:
	return json.dumps(
		{
			"config_file": config.config_file,
			"config_file_found": config.config_file_found,
			"settings": {
				key: {"value": value, "source": config.sources[key]} for key, value in config.masked_values().items()
			},
		},
		indent=2,
	)


def run(args) -> int:
	try:
		config = load_config(args)
	except ConfigError as exc:
		print(f"btu-scheduler config: {exc}", file=sys.stderr)
		return EXIT_BAD_INPUT
	print(render_json(config) if args.json else render_text(config))
	return EXIT_OK
