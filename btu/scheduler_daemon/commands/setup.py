"""`btu-scheduler setup procfile|supervisor|systemd`: run the scheduler with the bench.

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
"""

from __future__ import annotations

import os
import re
import shutil
import sys
from pathlib import Path

from btu.scheduler_daemon.bench import BenchError, find_bench, is_bench_directory
from btu.scheduler_daemon.cli import EXIT_BAD_INPUT, EXIT_FAILED, EXIT_OK

PROCFILE_ENTRY = "btu_scheduler: bench btu-scheduler"
PROCFILE_NAME = "btu_scheduler"
# SIGTERM makes the leader release its lease; give a fire in flight time to finish.
STOP_WAIT_SECS = 30
TARGETS = ("procfile", "supervisor", "systemd")


def register(subparsers) -> None:
	parser = subparsers.add_parser(
		"setup",
		help="add the scheduler to the bench's Procfile, or make a supervisor program or systemd unit",
		description=(
			"procfile: add 'btu_scheduler: bench btu-scheduler' to <bench>/Procfile (idempotent; run it again "
			"after `bench setup procfile`, which rewrites the file). supervisor / systemd: print the program "
			"block / unit, or with --write save it under <bench>/config/. Exit 0 done, 1 a file could not be "
			"written, 2 no bench."
		),
	)
	parser.add_argument("target", choices=TARGETS)
	parser.add_argument("--bench", metavar="DIR", help="the Frappe bench (default: the one holding the current directory)")
	parser.add_argument("--write", action="store_true", help="supervisor/systemd: write the file into <bench>/config/")
	parser.add_argument("--user", help="supervisor/systemd: the user to run as (default: the bench directory's owner)")
	parser.add_argument(
		"--bench-command",
		metavar="PATH",
		help="the bench executable (default: <bench>/env/bin/bench, else `bench` on PATH)",
	)
	parser.set_defaults(handler=run)


def run(args) -> int:
	try:
		bench = resolve_bench(args.bench)
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
			hint = f"link it: sudo ln -s {path} /etc/supervisor/conf.d/{bench.name}-btu-scheduler.conf && sudo supervisorctl reread && sudo supervisorctl update"
		else:
			text, path = systemd_unit(bench, command, user), bench / "config" / f"{bench.name}-btu-scheduler.service"
			hint = f"install it: sudo ln -s {path} /etc/systemd/system/ && sudo systemctl daemon-reload && sudo systemctl enable --now {path.name}"
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
