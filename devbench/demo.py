"""`python -m devbench demo`: a dev bench with sample schedules, the scheduler and a worker.

README command one ends here (scripts/quickstart). It makes (or reuses) a dev
bench with a demo site whose schedules fire every few seconds, then runs the
scheduler in this process and a plain `rq worker` beside it, both printing to
the terminal, until Ctrl-C stops both. The worker has the bench's apps on its
path, as a bench's workers have them installed: the sample tasks are those of
the dev bench's own app, btu_demo. The demo bench's databases are dropped on
the way out unless --keep is given.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from btu.scheduler_daemon.commands import EXIT_BAD_INPUT, EXIT_FAILED, EXIT_OK
from btu.scheduler_daemon.reads.app_files import read_apps

DEMO_SITE = "demo.localhost"
SAMPLES = (
	# (task description, function, arguments JSON, schedule fields)
	("Say hello every 2 seconds", "btu_demo.demo_tasks.say_hello", '{"name": "BTU"}',
		{"run_frequency": "Cron Style", "cron_string": "*/2 * * * * *"}),
	("Add numbers every 3 seconds", "btu_demo.demo_tasks.add", '{"a": 2, "b": 3}',
		{"run_frequency": "Interval", "every": 3, "every_unit": "Seconds"}),
	("Hello from New York every 5 seconds", "btu_demo.demo_tasks.say_hello", '{"name": "New York"}',
		{"run_frequency": "Cron Style", "cron_string": "*/5 * * * * *", "time_zone": "America/New_York"}),
)  # fmt: skip


NAME = "demo"
HELP = "run a demo: dev bench, sample schedules every few seconds, scheduler and worker (Ctrl-C stops)"
DESCRIPTION = (
	"Make (or reuse) a dev bench with a demo site whose schedules fire every few seconds, then run the scheduler "
	"and a plain rq worker until Ctrl-C. The demo bench's databases are dropped afterwards unless --keep is given."
)


def arguments(parser) -> None:
	# --bench is where the demo's dev bench goes, never a Frappe bench.
	parser.add_argument(
		"--bench", default="/tmp/btu-demo-bench", help="where to make the demo bench (default %(default)s)"
	)
	parser.add_argument(
		"--redis-url", default="redis://127.0.0.1:6379/0", help="Redis for the queues and state (default %(default)s)"
	)
	parser.add_argument("--db-host", default="127.0.0.1")
	parser.add_argument("--db-port", type=int, default=3306)
	parser.add_argument("--db-root-user", default="root")
	parser.add_argument("--db-root-password", default="")
	parser.add_argument("--keep", action="store_true", help="keep the demo bench and its database afterwards")


def run(args) -> int:
	from btu.scheduler_daemon.leading.engine import Scheduler
	from btu.scheduler_daemon.log import configure
	from btu.scheduler_daemon.operations.config import load_config
	from devbench import bench as devbench
	from devbench.data import SiteData

	root = {"db_root_user": args.db_root_user, "db_root_password": args.db_root_password}
	try:
		bench = devbench.create_dev_bench(
			Path(args.bench), (DEMO_SITE,), db_host=args.db_host, db_port=args.db_port, redis_url=args.redis_url, **root
		)
	except Exception as exc:
		print(f"devbench demo: cannot make the demo bench: {exc}", file=sys.stderr)
		return EXIT_BAD_INPUT
	with SiteData(bench, DEMO_SITE) as data:
		existing = data.task_functions()
		for description, function, arguments, schedule in SAMPLES:
			if description not in existing:
				task = data.insert_task(desc_short=description, function_string=function, arguments=arguments)
				data.insert_schedule(task, **schedule)
			elif existing[description][1] != function:
				# A demo bench kept (--keep) from before the samples moved to btu_demo named btu.devbench.demo_tasks.
				data.update("BTU Task", existing[description][0], function_string=function)
	config = load_config(None, environ={"BTU_SCHEDULER_BENCH": str(bench.path), "BTU_SCHEDULER_EXECUTOR": "rq"})
	configure("INFO", "text")
	queue = bench.queue_name("default")
	print(f"demo: bench {bench.path}, site {DEMO_SITE}, queue {queue}; Ctrl-C stops", flush=True)
	worker = subprocess.Popen(
		[
			sys.executable,
			"-m",
			"rq.cli",
			"worker",
			"--url",
			args.redis_url,
			"--name",
			f"btu-demo-{bench.bench_id}",
			*app_paths(bench),
			queue,
		],
		start_new_session=True,
	)
	try:
		Scheduler(config, bench.path).serve()
	finally:
		worker.terminate()
		try:
			worker.wait(10)
		except subprocess.TimeoutExpired:
			worker.kill()
			worker.wait()
		if not args.keep:
			devbench.drop_dev_bench(bench.path, **root)
			print(f"demo: dropped {bench.path} and its database (use --keep to keep them)")
	return EXIT_OK if worker.returncode is not None else EXIT_FAILED


def app_paths(bench) -> list[str]:
	"""`--path apps/<app>` for each app of the bench with a directory there, as bench's env has them installed."""
	paths = []
	for app in read_apps(bench.path / "sites" / "apps.txt"):
		if (bench.path / "apps" / app / app).is_dir():
			paths += ["--path", str(bench.path / "apps" / app)]
	return paths
