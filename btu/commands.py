"""Bench commands: `bench btu-scheduler [SUBCOMMAND] [ARGS...]` runs the BTU scheduler CLI for this bench;
`bench --site SITE btu-declare-tasks --app APP` writes the btu_tasks block an upgraded site's Tasks need.

With no arguments it runs `btu-scheduler run` (the long-running scheduler,
what a Procfile or supervisor line starts). `--bench <this bench>` is added
for every subcommand that takes it, so `bench btu-scheduler status` just works.

`bench worker` imports every app's commands module before it starts, then forks a work-horse for each job:
BTU's run path imported here, in a worker only, is inherited by every horse instead of imported by each run; and
here a worker starts its scheduler candidate, its child for its life (btu/scheduler_daemon/leading/worker_candidate.py).
"""

from __future__ import annotations

import sys

import click


def preload_run_path(argv: list[str]) -> bool:
	"""Import the modules a BTU run needs when this process is to be a bench worker; True if it did. A failure is left
	to each run, which imports them again and reports it in its own job: the bench's other commands keep working."""
	if {"worker", "worker-pool"}.isdisjoint(argv[1:]):
		return False
	try:
		import btu.btu_core.task_runner  # noqa: F401
	except Exception:
		return False
	return True


def bench_argv(args: tuple[str, ...] | list[str], bench_path: str) -> list[str]:
	"""The scheduler CLI's argv for `bench btu-scheduler ARGS`: this bench's path added where `--bench` names it."""
	from btu.scheduler_daemon.commands import takes_frappe_bench

	argv = list(args) or ["run"]
	if argv[0].startswith("-") or "--bench" in argv or any(a.startswith("--bench=") for a in argv):
		return argv
	if takes_frappe_bench(argv[0]):
		return [argv[0], "--bench", bench_path, *argv[1:]]
	return argv


@click.command(
	"btu-scheduler",
	context_settings={"ignore_unknown_options": True, "allow_extra_args": True, "help_option_names": []},
	add_help_option=False,
)
@click.argument("args", nargs=-1, type=click.UNPROCESSED)
def btu_scheduler(args):
	"""Run the BTU scheduler for this bench (default subcommand: run); see `bench btu-scheduler --help`."""
	from frappe.utils import get_bench_path

	from btu.scheduler_daemon.cli import main

	sys.exit(main(bench_argv(args, get_bench_path())))


@click.command("btu-declare-tasks")
@click.option("--app", required=True, help="The app whose hooks.py declares its own functions (e.g. your site's app)")
@click.option("--write", is_flag=True, help="Append the block to the app's hooks.py instead of printing it")
@click.pass_context
def btu_declare_tasks(context, app, write):
	"""The btu_tasks block declaring APP's functions that this site's BTU Tasks run undeclared (after an upgrade
	from the original BTU); the other Tasks are listed with the app that must declare them."""
	import frappe

	from btu.btu_core.upgrade.declare import declare

	site = context.obj["sites"][0] if context.obj and context.obj.get("sites") else None
	if not site:
		raise click.UsageError("name the site: bench --site SITE btu-declare-tasks --app APP")
	frappe.init(site)
	frappe.connect()
	try:
		sys.exit(declare(app, write=write))
	finally:
		frappe.destroy()


def start_worker_candidate(argv: list[str]):
	"""This worker's scheduler candidate (None when this process is no long-lived worker, or the setting is off). A
	failure to start it is printed and leaves the worker as it is: its jobs run, and another candidate may lead."""
	from btu.scheduler_daemon.leading import worker_candidate

	if not worker_candidate.wanted(argv):
		return None
	try:
		from frappe.utils import get_bench_path

		candidate = worker_candidate.start(get_bench_path())
		if candidate:
			candidate.restart_at_maintenance()
		return candidate
	except Exception as exc:
		print(f"btu: this worker starts no scheduler candidate: {type(exc).__name__}: {exc}", file=sys.stderr)
		return None


commands = [btu_scheduler, btu_declare_tasks]
preload_run_path(sys.argv)
candidate = start_worker_candidate(sys.argv)
