"""`python -m devbench bench DIR`: make (or `--drop`) a dev bench with real MariaDB databases."""

from __future__ import annotations

import argparse
import sys

from btu.scheduler_daemon.commands import EXIT_BAD_INPUT, EXIT_FAILED, EXIT_OK
from btu.shared.redis_urls import mask_url

NAME = "bench"
HELP = "make a dev bench: a directory the scheduler treats like a real Frappe bench"
DESCRIPTION = (
	"Make DIR a dev bench: bench layout, site configs, a MariaDB database and user per site, "
	"and the BTU tables from the app's DocType JSON files; btu and the dev bench's own app btu_demo (the demo's "
	"tasks) are linked into apps/. Running it again keeps the data; --drop removes the databases, users and DIR."
)


def arguments(parser) -> None:
	parser.add_argument("dir", metavar="DIR", help="the dev bench directory (new, empty, or an existing dev bench)")
	parser.add_argument(
		"--site",
		dest="sites",
		action="append",
		metavar="NAME",
		help="a site to make (repeatable; default site1.localhost)",
	)
	parser.add_argument("--db-host", default="127.0.0.1", help="MariaDB host (default 127.0.0.1)")
	parser.add_argument("--db-port", type=int, default=3306, help="MariaDB port (default 3306)")
	parser.add_argument(
		"--db-root-user", default="root", help="MariaDB user that may create databases and users (default root)"
	)
	parser.add_argument("--db-root-password", default="", help="that user's password (default empty)")
	parser.add_argument(
		"--redis-url",
		default="redis://127.0.0.1:6379/0",
		help="the bench's redis_queue (default redis://127.0.0.1:6379/0)",
	)
	parser.add_argument("--time-zone", help="System Settings time zone of the sites (default UTC for a new site)")
	parser.add_argument(
		"--bench-id", help="common_site_config bench_id (default: derived from the path, as Frappe does)"
	)
	parser.add_argument(
		"--app", dest="apps", action="append", default=[], metavar="NAME=DIR",
		help="also install app NAME whose package is DIR/NAME (repeatable): "
		"the rq executor runs only functions apps declare",
	)  # fmt: skip
	parser.add_argument("--drop", action="store_true", help="drop the dev bench's databases and users and remove DIR")


def run(args: argparse.Namespace) -> int:
	from devbench.bench import DevBenchError, DevBenchInputError, create_dev_bench, drop_dev_bench

	try:
		if args.drop:
			drop_dev_bench(args.dir, db_root_user=args.db_root_user, db_root_password=args.db_root_password)
			print(f"dropped dev bench {args.dir}")
			return EXIT_OK
		if args.time_zone:
			check_zone(args.time_zone)
		apps = dict(app.partition("=")[::2] for app in args.apps)
		bench = create_dev_bench(
			args.dir,
			tuple(args.sites or ("site1.localhost",)),
			db_host=args.db_host,
			db_port=args.db_port,
			db_root_user=args.db_root_user,
			db_root_password=args.db_root_password,
			redis_url=args.redis_url,
			time_zone=args.time_zone,
			bench_id=args.bench_id,
			apps=apps,
		)
	except DevBenchInputError as exc:
		print(f"devbench bench: {exc}", file=sys.stderr)
		return EXIT_BAD_INPUT
	except DevBenchError as exc:
		print(f"devbench bench: {exc}", file=sys.stderr)
		return EXIT_FAILED
	for site in bench.sites():
		print(
			f"dev bench {bench.path}: site {site.name}, "
			f"database {site.config['db_name']} on {site.db_params['host']}:{site.db_params['port']}"
		)
	print(f"redis_queue {mask_url(bench.redis_queue_url)}; queues {bench.queue_name('default')} ...")
	return EXIT_OK


def check_zone(name: str) -> None:
	from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

	from devbench.bench import DevBenchInputError

	try:
		ZoneInfo(name)
	except (ZoneInfoNotFoundError, ValueError):
		raise DevBenchInputError(
			f"--time-zone {name!r}: not an IANA time zone; use e.g. UTC or Europe/Berlin"
		) from None
