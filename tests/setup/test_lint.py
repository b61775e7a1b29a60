"""The tree is formatted by `ruff format` and passes `ruff check`, with the repository's ruff.toml.

ruff comes from the test's own venv (`python -m ruff`), where scripts/venv installs it at the version it pins: the
formatter's output changes between ruff versions, so another version is refused rather than trusted. The outcome
depends on no library BTU runs with, so one leg of scripts/test runs it (no `versions` mark).
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
CONFIG = ROOT / "ruff.toml"


def pinned_version() -> str:
	"""The ruff version scripts/venv installs."""
	found = re.findall(r"\bruff==([0-9][^\s'\"]*)", (ROOT / "scripts" / "venv").read_text())
	assert len(found) == 1, f"scripts/venv should pin ruff once (ruff==X.Y.Z), found {found}"
	return found[0]


def ruff(*args: str) -> subprocess.CompletedProcess:
	return subprocess.run(
		[sys.executable, "-m", "ruff", *args], cwd=ROOT, capture_output=True, text=True, timeout=120, check=False
	)


def check_ruff_version() -> None:
	"""Fails, naming scripts/venv, when this Python has no ruff or another version than the one pinned."""
	want = pinned_version()
	try:
		version = ruff("--version")
	except OSError as exc:
		pytest.fail(f"cannot run {sys.executable} -m ruff ({exc}): scripts/venv installs ruff=={want}", pytrace=False)
	if version.returncode != 0:
		pytest.fail(
			f"ruff is missing from {sys.executable}'s venv: scripts/venv installs it "
			f"(pip install ruff=={want})\n{version.stderr.strip()}",
			pytrace=False,
		)
	have = version.stdout.split()[-1] if version.stdout.split() else "?"
	if have != want:
		pytest.fail(
			f"{sys.executable} has ruff {have}, scripts/venv pins ruff=={want} (formatting differs between "
			f"versions): rerun scripts/venv, or pip install ruff=={want}",
			pytrace=False,
		)


def test_ruff_check_passes():
	check_ruff_version()
	result = ruff("check", "--config", str(CONFIG), "--no-cache", "--output-format", "concise", ".")
	if result.returncode != 0:
		pytest.fail(
			"ruff check (ruff.toml) finds problems; fix them (`ruff check --fix` fixes some):\n"
			f"{result.stdout}{result.stderr}",
			pytrace=False,
		)


def test_ruff_format_leaves_the_tree_unchanged():
	check_ruff_version()
	result = ruff("format", "--config", str(CONFIG), "--no-cache", "--check", ".")
	if result.returncode != 0:
		pytest.fail(
			"ruff format (ruff.toml) would reformat files; run `ruff format` from the repository root:\n"
			f"{result.stdout}{result.stderr}",
			pytrace=False,
		)
