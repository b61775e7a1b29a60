"""`btu-scheduler run`: the scheduler process (the main job of a bench)."""

from __future__ import annotations

import logging
import os
import sys

from btu.scheduler_daemon.commands import EXIT_BAD_INPUT, EXIT_OK
from btu.scheduler_daemon.log import configure, log_event
from btu.scheduler_daemon.operations import redis_acl
from btu.scheduler_daemon.operations.config import CONFIG_PATH_ENV, ConfigError, add_config_flags, load_config
from btu.scheduler_daemon.reads.bench import DEFAULT_REDIS_QUEUE, BenchError
from btu.shared.redis_urls import mask_url

logger = logging.getLogger("btu.scheduler")


NAME = "run"
HELP = "run the scheduler for every BTU site of the bench (until SIGTERM or Ctrl-C)"
DESCRIPTION = (
	"Fire every enabled BTU Task Schedule of every site of the bench into the sites' RQ queues. "
	"Run as many as you like against one Redis: one leads, the others stand by. SIGTERM and SIGINT "
	"release the lease so a standby takes over at once."
)
FRAPPE_BENCH = True


def arguments(parser) -> None:
	add_config_flags(parser)
	parser.add_argument(
		"--for-worker",
		dest="for_worker",
		type=int,
		default=None,
		metavar="PID",
		help=(
			"run as the scheduler candidate of the Frappe worker PID, this process's parent: yield the lease to a "
			"dedicated scheduler, exit with the worker (each worker starts its own)"
		),
	)


def run(args) -> int:
	try:
		config = load_config(args)
		configure(config.log_level, config.log_format)
		bench = config.load_bench()
		keys = bench.keys
	except (ConfigError, BenchError) as exc:
		print(f"btu-scheduler run: {exc}", file=sys.stderr)
		return EXIT_BAD_INPUT
	exposed = metrics_exposed(config)
	if exposed:
		print(f"btu-scheduler run: {exposed}", file=sys.stderr)
		return EXIT_BAD_INPUT
	# Refused like a bad configuration, in one line: a user without BTU's grants would fail deep in a loop.
	denied = redis_acl.check(config.redis(socket_timeout=10, socket_connect_timeout=3), keys, bench.bench_id)
	if denied:
		print(f"btu-scheduler run: {denied}", file=sys.stderr)
		return EXIT_BAD_INPUT
	log_startup(args, config, bench)
	from btu.scheduler_daemon.leading.engine import Scheduler, serve

	scheduler = Scheduler(config, bench.path, worker_pid=args.for_worker)
	try:
		server = serve_metrics(config, scheduler.metrics)
	except OSError as exc:
		print(f"btu-scheduler run: {metrics_unbound(config, exc)}", file=sys.stderr)
		return EXIT_BAD_INPUT
	try:
		serve(scheduler)
	finally:
		if server is not None:
			server.stop()
	return EXIT_OK


def serve_metrics(config, metrics):
	"""The metrics endpoint when `metrics_port` is set (None otherwise), started and logged with the port it has."""
	if config.metrics_port is None:
		return None
	from btu.scheduler_daemon.operations.metrics import MetricsServer

	server = MetricsServer(
		metrics.registry, config.metrics_address, config.metrics_port, config.metrics_bearer_token
	).start()
	log_event(
		logger, logging.INFO, "metrics_listening", address=config.metrics_address, port=server.port, path="/metrics"
	)
	return server


def metrics_exposed(config) -> str | None:
	"""Why the metrics endpoint may not listen as configured (None when it is off, or may)."""
	if config.metrics_port is None:
		return None
	from btu.scheduler_daemon.operations.metrics import exposure_refusal

	return exposure_refusal(config.metrics_address, config.metrics_bearer_token, config.metrics_allow_unauthenticated)


def metrics_unbound(config, exc: OSError) -> str:
	return (
		f"metrics_port {config.metrics_port} (from {config.sources['metrics_port']}) "
		f"on metrics_address {config.metrics_address} "
		f"(from {config.sources['metrics_address']}) cannot be bound: {exc.strerror or exc}; choose a free port, "
		f"or an address of this host"
	)


def redis_origin(config, bench) -> tuple[str, str]:
	"""The Redis URL the scheduler uses (masked) and where it came from, so an outage log says what to fix."""
	if config.redis_url:
		return mask_url(config.redis_url), config.sources["redis_url"]
	common = bench.sites_path / "common_site_config.json"
	if bench.sentinel is not None:
		return bench.sentinel.describe(), f"redis_queue_sentinel_enabled of {common}"
	if os.environ.get("FRAPPE_REDIS_QUEUE"):
		return mask_url(bench.redis_queue_url), "environment variable FRAPPE_REDIS_QUEUE"
	if bench.common_config.get("redis_queue"):
		return mask_url(bench.redis_queue_url), f"redis_queue of {common}"
	return DEFAULT_REDIS_QUEUE, f"Frappe's default (no redis_queue in {common})"


def log_startup(args, config, bench) -> None:
	url, origin = redis_origin(config, bench)
	log_event(
		logger,
		logging.INFO,
		"scheduler_config",
		redis=url,
		redis_from=origin,
		config_file=config.config_file,
		config_file_found=config.config_file_found,
	)
	named_by = (
		"flag --config"
		if getattr(args, "config", None)
		else (f"env {CONFIG_PATH_ENV}" if os.environ.get(CONFIG_PATH_ENV) else None)
	)
	if named_by and not config.config_file_found:
		# A missing default file is normal; a file someone named is probably a typo whose settings are not applied.
		log_event(
			logger,
			logging.WARNING,
			"config_file_missing",
			path=config.config_file,
			named_by=named_by,
			effect="not read: defaults, BTU_SCHEDULER_* variables and flags apply; fix the path",
		)
