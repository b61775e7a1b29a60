"""`bench btu-scheduler ARGS`: the scheduler CLI's argv with this bench inserted."""

from __future__ import annotations

from btu.commands import bench_argv, btu_scheduler


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
