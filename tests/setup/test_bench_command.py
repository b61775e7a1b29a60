"""`bench btu-scheduler ARGS`: the scheduler CLI's argv with this bench inserted."""

from __future__ import annotations

import pytest

from btu.commands import bench_argv, btu_scheduler

pytestmark = pytest.mark.versions


def test_no_arguments_runs_the_scheduler():
	assert bench_argv((), "/b") == ["run", "--bench", "/b"]


def test_bench_goes_after_the_subcommand():
	assert bench_argv(("status", "--json"), "/b") == ["status", "--bench", "/b", "--json"]
	assert bench_argv(("setup", "procfile"), "/b") == ["setup", "--bench", "/b", "procfile"]


def test_an_explicit_bench_wins():
	assert bench_argv(("status", "--bench", "/other"), "/b") == ["status", "--bench", "/other"]
	assert bench_argv(("status", "--bench=/other"), "/b") == ["status", "--bench=/other"]


def test_options_before_a_subcommand_pass_through():
	assert bench_argv(("--help",), "/b") == ["--help"]


def test_subcommands_without_bench_are_left_alone():
	assert bench_argv(("next", "--cron", "0 9 * * *"), "/b") == ["next", "--cron", "0 9 * * *"]


def test_click_command_is_named_for_bench():
	assert btu_scheduler.name == "btu-scheduler"


def test_the_dev_tooling_commands_are_not_the_schedulers_and_are_left_alone():
	# The demo and the dev bench are `python -m devbench demo|bench` (their --bench is a dev bench, never the bench
	# `bench btu-scheduler` runs in): btu-scheduler refuses them as unknown, and no bench is inserted into them.
	from btu.scheduler_daemon.commands import SUBCOMMANDS, module

	for name in ("demo", "dev-bench", "dev_bench"):
		assert name not in SUBCOMMANDS
		with pytest.raises(KeyError):
			module(name)
	assert bench_argv(("demo",), "/b") == ["demo"]
	assert bench_argv(("dev-bench", "/tmp/x"), "/b") == ["dev-bench", "/tmp/x"]


def test_every_subcommand_said_to_take_the_frappe_bench_takes_it():
	from btu.scheduler_daemon.cli import build_parser
	from btu.scheduler_daemon.commands import SUBCOMMANDS, module, takes_frappe_bench

	parser = build_parser()
	required = {"setup": ["procfile"]}
	for name in SUBCOMMANDS:
		command = module(name).NAME
		if takes_frappe_bench(command):
			args = parser.parse_args([command, *required.get(command, []), *bench_argv((command,), "/b")[1:]])
			assert args.bench == "/b", command
	assert not takes_frappe_bench("no-such-command")
