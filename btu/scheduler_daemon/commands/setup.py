"""`btu-scheduler setup procfile|supervisor|systemd|redis-acl`: run the scheduler with the bench.

Bench has no hook for an app's own process, so:
- procfile adds `btu_scheduler: bench btu-scheduler` to the bench's Procfile
  (for `bench start`); `bench setup procfile` rewrites the Procfile, so run
  this again after it;
- supervisor prints (or with --write writes to <bench>/config/) a program
  block, to link into supervisor's conf.d next to the bench's own;
- systemd prints (or writes) a unit.
Both run `bench btu-scheduler` from the bench with restart on failure, stop by
SIGTERM (the scheduler steps down and hands over at once) and logs in
<bench>/logs/.

redis-acl prints the ACL SETUSER line that gives the bench's Redis user
(the one `bench create-rq-users` made) what BTU needs on top of Frappe's
grants, or with --apply runs it as an admin (btu.scheduler_daemon.operations.redis_acl).

db-reader prints the SQL that makes the bench's MariaDB reader login and grants
it SELECT on each site's BTU tables, so that a reconcile reads many sites in one
query (btu.scheduler_daemon.reads.server_read); --apply runs it as the server's admin
and saves the login in common_site_config.json (btu.scheduler_daemon.reads.db_reader).
"""

from __future__ import annotations

import os
import re
import shutil
import sys
from pathlib import Path

import redis

from btu.scheduler_daemon.commands import EXIT_BAD_INPUT, EXIT_FAILED, EXIT_OK
from btu.scheduler_daemon.operations import redis_acl
from btu.scheduler_daemon.reads import db_reader
from btu.scheduler_daemon.reads.bench import Bench, BenchError, find_bench, is_bench_directory
from btu.scheduler_daemon.reads.server_read import READER_PASSWORD_KEY, READER_USER_KEY
from btu.shared.redis_refusals import is_denied, redis_user
from btu.shared.redis_urls import mask_url

PROCFILE_ENTRY = "btu_scheduler: bench btu-scheduler"
PROCFILE_NAME = "btu_scheduler"
READER_NAME = re.compile(r"[A-Za-z0-9_.-]{1,80}")
# SIGTERM makes the leader release its lease; give a fire in flight time to finish.
STOP_WAIT_SECS = 30
TARGETS = ("procfile", "supervisor", "systemd", "redis-acl", "db-reader")
# Frappe's admin password for its queue Redis (sic: Frappe's spelling).
ADMIN_PASSWORD_ENV = "RQ_ADMIN_PASWORD"
DB_ADMIN_PASSWORD_ENV = "BTU_DB_ROOT_PASSWORD"


NAME = "setup"
HELP = "add the scheduler to the bench's Procfile, make a supervisor program or systemd unit, or grant BTU's Redis ACL"
DESCRIPTION = (
	"procfile: add 'btu_scheduler: bench btu-scheduler' to <bench>/Procfile (idempotent; run it again "
	"after `bench setup procfile`, which rewrites the file). supervisor / systemd: print the program "
	"block / unit, or with --write save it under <bench>/config/. redis-acl: print the ACL SETUSER line "
	"BTU needs on top of the Redis user `bench create-rq-users` made, or with --apply run it (and ACL SAVE "
	"when Redis has an aclfile). db-reader: print the SQL that grants the bench's MariaDB reader login SELECT on "
	"each site's BTU tables (a reconcile then reads many sites a query), or with --apply run it as the server's "
	f"admin (--admin-user, password in ${DB_ADMIN_PASSWORD_ENV}) and save the login in common_site_config.json; "
	"run it again after bench new-site. Exit 0 done, 1 a file could not be written or a server is down, 2 no "
	"bench, no such Redis user, or an admin that may not change users."
)
FRAPPE_BENCH = True


def arguments(parser) -> None:
	parser.add_argument("target", choices=TARGETS)
	parser.add_argument(
		"--bench", metavar="DIR", help="the Frappe bench (default: the one holding the current directory)"
	)
	parser.add_argument("--write", action="store_true", help="supervisor/systemd: write the file into <bench>/config/")
	parser.add_argument(
		"--user",
		help="supervisor/systemd: the user to run as (default: the bench directory's owner); redis-acl: the Redis ACL "
		"user (default: rq_username of common_site_config.json, else the bench id, as Frappe picks it); db-reader: "
		f"the MariaDB reader (default: the one common_site_config.json names, else {db_reader.DEFAULT_USER})",
	)
	parser.add_argument(
		"--apply",
		action="store_true",
		help="redis-acl: run the ACL SETUSER line through --admin-url; db-reader: run the grants and save the login",
	)
	parser.add_argument(
		"--admin-user",
		default="root",
		help=(
			f"db-reader --apply: a MariaDB user that may grant (default root; its password in ${DB_ADMIN_PASSWORD_ENV})"
		),
	)
	parser.add_argument(
		"--admin-url",
		metavar="URL",
		help=f"redis-acl --apply: a Redis URL whose user may run ACL SETUSER (default: the bench's redis_queue as user "
		f"default, with the password in ${ADMIN_PASSWORD_ENV} if set)",
	)
	parser.add_argument(
		"--bench-command",
		metavar="PATH",
		help="the bench executable (default: <bench>/env/bin/bench, else `bench` on PATH)",
	)


def run(args) -> int:
	try:
		bench = resolve_bench(args.bench)
		if args.target == "redis-acl":
			return redis_acl_target(Bench.load(bench), args.user, args.apply, args.admin_url)
		if args.target == "db-reader":
			return db_reader_target(Bench.load(bench), args.user, args.apply, args.admin_user)
	except BenchError as exc:
		print(f"btu-scheduler setup: {exc}", file=sys.stderr)
		return EXIT_BAD_INPUT
	try:
		if args.target == "procfile":
			changed = add_to_procfile(bench / "Procfile")
			print(f"{bench / 'Procfile'}: {'added' if changed else 'already has'} '{PROCFILE_ENTRY}'")
			return EXIT_OK
		command = scheduler_command(bench, args.bench_command)
		user = args.user or owner_of(bench)
		if args.target == "supervisor":
			text, path = supervisor_program(bench, command, user), bench / "config" / "btu_scheduler.supervisor.conf"
			hint = (
				f"link it: sudo ln -s {path} /etc/supervisor/conf.d/{bench.name}-btu-scheduler.conf"
				" && sudo supervisorctl reread && sudo supervisorctl update"
			)
		else:
			text, path = systemd_unit(bench, command, user), bench / "config" / f"{bench.name}-btu-scheduler.service"
			hint = (
				f"install it: sudo ln -s {path} /etc/systemd/system/"
				f" && sudo systemctl daemon-reload && sudo systemctl enable --now {path.name}"
			)
		if not args.write:
			sys.stdout.write(text)
			return EXIT_OK
		path.parent.mkdir(parents=True, exist_ok=True)
		path.write_text(text)
		print(f"wrote {path}; {hint}")
		return EXIT_OK
	except OSError as exc:
		print(f"btu-scheduler setup {args.target}: {exc.filename or ''}: {exc.strerror or exc}", file=sys.stderr)
		return EXIT_FAILED


def redis_acl_target(bench: Bench, user: str | None, apply: bool, admin_url: str | None) -> int:
	user = user or bench.common_config.get("rq_username") or bench.bench_id
	if not apply:
		print(redis_acl.setuser_line(user, bench.keys, bench.bench_id))  # the bench's own keys only
		print(
			"# Run it in redis-cli as an admin (then ACL SAVE if Redis has an aclfile), "
			"or: btu-scheduler setup redis-acl "
			"--apply. It only adds grants. Redis 6.0 has no channel rules: leave out the & ones; Redis before 6 has no "
			"ACL and needs nothing.",
			file=sys.stderr,
		)
		return EXIT_OK
	password = None if admin_url else os.environ.get(ADMIN_PASSWORD_ENV)
	admin = None
	shown = (
		mask_url(admin_url or bench.redis_queue_url) if admin_url or not bench.sentinel else bench.sentinel.describe()
	)
	try:
		url = admin_url or (
			bench.sentinel.master_url(socket_connect_timeout=5, socket_timeout=10)
			if bench.sentinel
			else bench.redis_queue_url
		)
		admin = redis.Redis.from_url(
			url,
			socket_connect_timeout=5,
			socket_timeout=10,
			**({"username": "default", "password": password} if password else {}),
		)
		applied = apply_grants(admin, shown, user, bench)
		if bench.sentinel and applied == EXIT_OK:
			# Redis does not replicate ACL rules: a replica promoted later must already know the user.
			print(
				f"note: {bench.sentinel.describe()}: ACL rules are not replicated; "
				"run this again with --admin-url for each replica",
				file=sys.stderr,
			)
		return applied
	except redis.RedisError as exc:
		if is_denied(exc):
			print(
				f"btu-scheduler setup redis-acl: Redis at {shown} "
				f"refused user {redis_user(admin) if admin else 'default'!r} ({exc}); pass "
				f"--admin-url with a user that may run ACL SETUSER and ACL SAVE (default, or ${ADMIN_PASSWORD_ENV})",
				file=sys.stderr,
			)
			return EXIT_BAD_INPUT
		print(
			f"btu-scheduler setup redis-acl: Redis at {shown} failed ({type(exc).__name__}: {exc}); "
			"start it or fix --admin-url",
			file=sys.stderr,
		)
		return EXIT_FAILED
	finally:
		if admin is not None:
			admin.close()


def apply_grants(admin: redis.Redis, shown: str, user: str, bench: Bench) -> int:
	"""ACL SETUSER `user` with BTU's rules, ACL SAVE if there is an aclfile, then check the grants as that user."""
	version = str(admin.info("server").get("redis_version", "0"))
	major_minor = tuple(int(part) for part in version.split(".")[:2] if part.isdigit())
	if major_minor < (6, 0):
		print(
			f"Redis {version} at {shown} has no ACL (Redis 6.0 added it): "
			"its clients are not restricted, BTU needs no grant"
		)
		return EXIT_OK
	if admin.acl_getuser(user) is None:
		print(
			f"btu-scheduler setup redis-acl: Redis at {shown} has no ACL user {user!r}; "
			"make it first (bench create-rq-users), "
			"or name an existing one with --user",
			file=sys.stderr,
		)
		return EXIT_BAD_INPUT
	rules = redis_acl.rules(bench.keys, bench.bench_id, channels=major_minor >= (6, 2))
	admin.execute_command("ACL", "SETUSER", user, *rules)
	print(f"granted to Redis user {user!r} at {shown}: {' '.join(rules)}")
	aclfile = admin.config_get("aclfile").get("aclfile")
	if aclfile:
		admin.execute_command("ACL", "SAVE")
		print(f"saved with ACL SAVE to {aclfile} (bench create-rq-users rewrites that file: run this again after it)")
	else:
		print(
			"not saved: this Redis has no aclfile, so the grants last until it restarts; add them to its configuration"
		)
	if bench.redis_credentials.get("username") == user:
		denied = redis_acl.check(bench.redis(socket_connect_timeout=5, socket_timeout=10), bench.keys, bench.bench_id)
		if denied:
			print(f"btu-scheduler setup redis-acl: still refused after the grant: {denied}", file=sys.stderr)
			return EXIT_FAILED
		print(f"checked: user {user!r} has every grant BTU needs")
	return EXIT_OK


def db_reader_target(bench: Bench, user: str | None, apply: bool, admin_user: str) -> int:
	if user is not None and not READER_NAME.fullmatch(user):
		print(
			f"btu-scheduler setup db-reader: --user {user!r}: use letters, digits, '_', '.' or '-' (at most 80)",
			file=sys.stderr,
		)
		return EXIT_BAD_INPUT
	login, new = db_reader.login_for(bench, user)
	servers = db_reader.needed_grants(bench)
	if not servers:
		print(
			"no site of this bench has BTU's tables on MariaDB: nothing to grant "
			"(PostgreSQL sites are read on their own logins)"
		)
		return EXIT_OK
	failed = False
	for entry in servers.values():
		for site, why in sorted(entry.unread.items()):
			print(f"# {entry.server}: site {site} left out, its own login failed: {why}", file=sys.stderr)
		sql = db_reader.statements(login, entry.grants)
		sites = len({grant.site for grant in entry.grants})
		if not apply:
			print(f"-- {entry.server}: reader {login.user!r}, SELECT on the BTU tables of {sites} sites")
			print(";\n".join(sql) + ";")
			continue
		try:
			db_reader.apply(entry, admin_user, os.environ.get(DB_ADMIN_PASSWORD_ENV, ""), sql)
		except Exception as exc:  # PyMySQL's errors: refused, unreachable
			print(
				f"btu-scheduler setup db-reader: {entry.server} as {admin_user!r}: {exc}; "
				"pass --admin-user with a user that may "
				f"CREATE USER and GRANT (its password in ${DB_ADMIN_PASSWORD_ENV})",
				file=sys.stderr,
			)
			failed = True
			continue
		print(f"{entry.server}: granted reader {login.user!r} SELECT on the BTU tables of {sites} sites")
	if not apply:
		if new:
			print(
				f"-- then: bench set-config -g {READER_USER_KEY} {login.user} "
				f"&& bench set-config -g {READER_PASSWORD_KEY} '{login.password}'"
			)
		print(
			"# Run it as the server's admin, or: btu-scheduler setup db-reader --apply; again after bench new-site.",
			file=sys.stderr,
		)
		return EXIT_OK
	if failed:
		return EXIT_FAILED
	print(f"saved the login in {db_reader.save_login(bench, login)}; a running scheduler takes it at its next cycle")
	return EXIT_OK


def resolve_bench(path: str | None) -> Path:
	if path is None:
		return find_bench()
	bench = Path(path).expanduser().resolve()
	if not is_bench_directory(bench):
		raise BenchError(f"--bench {path}: not a Frappe bench (it needs Procfile, apps, config, env and sites)")
	return bench


def add_to_procfile(procfile: Path) -> bool:
	"""Make the Procfile hold exactly one btu_scheduler entry, ours; True if the file changed."""
	text = procfile.read_text() if procfile.exists() else ""
	lines = text.splitlines()
	entry = re.compile(rf"^\s*{PROCFILE_NAME}\s*:")
	found = [i for i, line in enumerate(lines) if entry.match(line)]
	if len(found) == 1 and lines[found[0]].strip() == PROCFILE_ENTRY:
		return False
	if found:
		lines[found[0]] = PROCFILE_ENTRY
		lines = [line for i, line in enumerate(lines) if i not in found[1:]]
	else:
		lines.append(PROCFILE_ENTRY)
	procfile.write_text("\n".join(lines) + "\n")
	return True


def scheduler_command(bench: Path, bench_command: str | None) -> str:
	"""`<bench executable> btu-scheduler`: the bench's own env first, as bench's supervisor.conf does."""
	if bench_command:
		return f"{bench_command} btu-scheduler"
	local = bench / "env" / "bin" / "bench"
	if local.exists():
		return f"{local} btu-scheduler"
	found = shutil.which("bench")
	if found:
		return f"{found} btu-scheduler"
	print(f"btu-scheduler setup: no bench executable at {local} nor on PATH; using {local}", file=sys.stderr)
	return f"{local} btu-scheduler"


def owner_of(bench: Path) -> str:
	try:
		import pwd

		return pwd.getpwuid(bench.stat().st_uid).pw_name
	except (ImportError, KeyError):
		return os.environ.get("USER", "frappe")


def supervisor_program(bench: Path, command: str, user: str) -> str:
	return f"""; BTU scheduler for the bench {bench}
; Generated by `btu-scheduler setup supervisor`; bench's own `bench setup supervisor` does not touch it.
[program:{bench.name}-btu-scheduler]
command={command}
directory={bench}
user={user}
priority=4
autostart=true
autorestart=true
startsecs=5
stopsignal=TERM
stopwaitsecs={STOP_WAIT_SECS}
stopasgroup=true
killasgroup=true
redirect_stderr=false
stdout_logfile={bench}/logs/btu-scheduler.log
stderr_logfile={bench}/logs/btu-scheduler.error.log
"""


def systemd_unit(bench: Path, command: str, user: str) -> str:
	return f"""# BTU scheduler for the bench {bench}
# Generated by `btu-scheduler setup systemd`.
[Unit]
Description=BTU scheduler for the Frappe bench {bench.name}
After=network-online.target redis-server.service mariadb.service
Wants=network-online.target

[Service]
Type=simple
User={user}
WorkingDirectory={bench}
ExecStart={command}
Restart=always
RestartSec=2
KillSignal=SIGTERM
KillMode=mixed
TimeoutStopSec={STOP_WAIT_SECS}
StandardOutput=append:{bench}/logs/btu-scheduler.log
StandardError=append:{bench}/logs/btu-scheduler.error.log

[Install]
WantedBy=multi-user.target
"""
