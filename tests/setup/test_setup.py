"""`btu-scheduler setup`: Procfile entry, supervisor program and systemd unit."""

from __future__ import annotations

from pathlib import Path

import pytest

from btu.scheduler_daemon.cli import main
from btu.scheduler_daemon.commands import EXIT_BAD_INPUT, EXIT_OK
from btu.scheduler_daemon.commands.setup import PROCFILE_ENTRY, add_to_procfile

pytestmark = pytest.mark.versions

BENCH_PROCFILE = (
	"web: bench serve  --port 8000\n\n\nschedule: bench schedule\n\nworker:  bench worker 1>> logs/worker.log\n"
)


@pytest.fixture
def bench(tmp_path: Path) -> Path:
	for name in ("apps", "config", "env/bin", "sites", "logs"):
		(tmp_path / name).mkdir(parents=True)
	(tmp_path / "Procfile").write_text(BENCH_PROCFILE)
	return tmp_path


def entries(procfile: Path) -> list[str]:
	return [line for line in procfile.read_text().splitlines() if line.startswith("btu_scheduler")]


def test_procfile_entry_is_added_once(bench, capsys):
	assert main(["setup", "procfile", "--bench", str(bench)]) == EXIT_OK
	assert "added" in capsys.readouterr().out
	first = (bench / "Procfile").read_text()
	assert main(["setup", "procfile", "--bench", str(bench)]) == EXIT_OK
	assert "already has" in capsys.readouterr().out
	assert (bench / "Procfile").read_text() == first
	assert entries(bench / "Procfile") == [PROCFILE_ENTRY]
	assert first.startswith(BENCH_PROCFILE), "the bench's own entries are kept as they were"


def test_stale_and_duplicate_entries_become_one(bench):
	procfile = bench / "Procfile"
	procfile.write_text(
		"web: bench serve\nbtu_scheduler: btu-scheduler run --old\nworker: bench worker\nbtu_scheduler : x"
	)
	assert add_to_procfile(procfile) is True
	assert procfile.read_text() == f"web: bench serve\n{PROCFILE_ENTRY}\nworker: bench worker\n"
	assert add_to_procfile(procfile) is False


def test_missing_procfile_is_created(tmp_path):
	procfile = tmp_path / "Procfile"
	assert add_to_procfile(procfile) is True
	assert procfile.read_text() == PROCFILE_ENTRY + "\n"


def test_supervisor_program_is_printed(bench, capsys):
	(bench / "env" / "bin" / "bench").write_text("#!/bin/sh\n")
	assert main(["setup", "supervisor", "--bench", str(bench), "--user", "frappe"]) == EXIT_OK
	text = capsys.readouterr().out
	assert f"[program:{bench.name}-btu-scheduler]" in text
	assert f"command={bench}/env/bin/bench btu-scheduler" in text
	assert f"directory={bench}" in text
	assert "user=frappe" in text
	assert "autorestart=true" in text
	assert "stopsignal=TERM" in text
	assert "stopwaitsecs=" in text
	assert f"stdout_logfile={bench}/logs/btu-scheduler.log" in text
	assert not (bench / "config" / "btu_scheduler.supervisor.conf").exists(), "printing writes nothing"


def test_supervisor_write_is_repeatable(bench, capsys):
	args = [
		"setup",
		"supervisor",
		"--bench",
		str(bench),
		"--user",
		"frappe",
		"--bench-command",
		"/usr/local/bin/bench",
		"--write",
	]
	assert main(args) == EXIT_OK
	path = bench / "config" / "btu_scheduler.supervisor.conf"
	first = path.read_text()
	assert "command=/usr/local/bin/bench btu-scheduler" in first
	assert main(args) == EXIT_OK
	assert path.read_text() == first
	assert "supervisorctl" in capsys.readouterr().out


def test_systemd_unit(bench, capsys):
	assert (
		main(["setup", "systemd", "--bench", str(bench), "--user", "frappe", "--bench-command", "/opt/bench"])
		== EXIT_OK
	)
	text = capsys.readouterr().out
	assert "ExecStart=/opt/bench btu-scheduler" in text
	assert f"WorkingDirectory={bench}" in text
	assert "Restart=always" in text
	assert "KillSignal=SIGTERM" in text
	assert "TimeoutStopSec=" in text
	assert f"StandardOutput=append:{bench}/logs/btu-scheduler.log" in text
	assert main(["setup", "systemd", "--bench", str(bench), "--user", "frappe", "--write"]) == EXIT_OK
	assert (bench / "config" / f"{bench.name}-btu-scheduler.service").exists()


def test_not_a_bench_is_bad_input(tmp_path, capsys):
	assert main(["setup", "procfile", "--bench", str(tmp_path)]) == EXIT_BAD_INPUT
	assert "not a Frappe bench" in capsys.readouterr().err
	assert not (tmp_path / "Procfile").exists()
