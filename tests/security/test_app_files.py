"""btu.scheduler_daemon.reads.app_files: what the scheduler reads of a bench's apps, without importing them."""

from __future__ import annotations

import sys
import textwrap
from pathlib import Path

import pytest

from btu.scheduler_daemon.reads.app_files import AppFiles
from btu.shared.declared import NotRunnable
from devbench.bench import BTU_SOURCE, DEMO_APP_SOURCE

pytestmark = pytest.mark.versions

TASKS = """
import os
import btu
from subprocess import getoutput
from btu import runnable
from .helpers import cleanup as imported_cleanup

system = os.system


@runnable
def decorated(key):
	return key


@btu.runnable
def decorated_by_attribute():
	pass


def hooked_exactly():
	pass


def hooked_by_glob_report():
	pass


def plain():
	pass


def rebound():
	pass


rebound = os.system


from os import popen


@runnable
def popen():
	pass


class Job:
	pass
"""


def write(path: Path, text: str) -> None:
	path.parent.mkdir(parents=True, exist_ok=True)
	path.write_text(textwrap.dedent(text))


@pytest.fixture
def bench(tmp_path):
	"""A bench layout: frappe (absent from apps/), btu, the dev bench's own app btu_demo, myapp and otherapp."""
	write(tmp_path / "sites" / "apps.txt", "frappe\nbtu\nbtu_demo\nmyapp\n\notherapp\n")
	(tmp_path / "apps").mkdir()
	(tmp_path / "apps" / "btu").symlink_to(BTU_SOURCE)
	(tmp_path / "apps" / "btu_demo").symlink_to(DEMO_APP_SOURCE)
	package = tmp_path / "apps" / "myapp" / "myapp"
	write(package / "__init__.py", "")
	write(
		package / "hooks.py",
		'app_name = "myapp"\n'
		'btu_tasks = ["myapp.tasks.hooked_exactly", "myapp.tasks.hooked_by_glob_*", "myapp.tasks.getoutput", '
		'"myapp.tasks.system", "myapp.tasks.Job"]\n',
	)
	write(package / "tasks.py", TASKS)
	write(package / "helpers.py", "def cleanup():\n\tpass\n")
	write(package / "reports" / "__init__.py", "def monthly():\n\tpass\n")
	write(tmp_path / "apps" / "otherapp" / "otherapp" / "hooks.py", 'btu_tasks = ["myapp.*", "otherapp.*"]\n')
	write(tmp_path / "apps" / "otherapp" / "otherapp" / "jobs.py", "def run():\n\tpass\n")
	return tmp_path


def refusal(files: AppFiles, path: str) -> str:
	with pytest.raises(NotRunnable) as caught:
		files.check(path)
	assert f"'{path}'" in str(caught.value)
	return str(caught.value)


@pytest.mark.parametrize(
	"path",
	["myapp.tasks.decorated", "myapp.tasks.decorated_by_attribute", "myapp.tasks.hooked_exactly",
	 "myapp.tasks.hooked_by_glob_report", "myapp.tasks.popen", "otherapp.jobs.run",
	 "btu_demo.demo_tasks.say_hello", "btu_demo.demo_tasks.add"],
)  # fmt: skip
def test_declared_functions_pass(bench, path):
	AppFiles(bench, False).check(path)


@pytest.mark.parametrize(
	"path, words",
	[
		("os.system", "'os' is not an installed app"),
		("subprocess.getoutput", "'subprocess' is not an installed app"),
		("builtins.eval", "'builtins' is not an installed app"),
		("btu_evil.tasks.run", "'btu_evil' is not an installed app"),
		("myapp..tasks.plain", "dotted path of ASCII identifiers"),
		("myapp.tasks/../../../etc.passwd", "dotted path of ASCII identifiers"),
		("my\u0430pp.tasks.decorated", "dotted path of ASCII identifiers"),  # Cyrillic a
		("frappe.utils.execute_in_shell", "frappe is listed in"),
		("myapp.tasks.getoutput", "is defined in subprocess and only imported into myapp.tasks"),
		("myapp.tasks.imported_cleanup", "is defined in myapp.helpers and only imported into myapp.tasks"),
		("myapp.tasks.system", "is not a function defined with def in myapp.tasks"),
		("myapp.tasks.rebound", "is not a function defined with def"),
		("myapp.tasks.Job", "is not a function defined with def"),
		("myapp.tasks.os", "is not a function defined with def"),
		("myapp.tasks.plain", 'btu_tasks = ["myapp.tasks.plain"]'),
		("myapp.helpers.cleanup", "@runnable (from btu import runnable) above def cleanup in myapp/helpers.py"),
		("myapp.reports.monthly", "is not declared runnable by BTU"),
		("myapp.tasks.missing", "defines no missing"),
		("myapp.nosuch.run", "module 'myapp.nosuch' has no file"),
		("btu_demo.demo_tasks.datetime", "is defined in datetime and only imported"),
		("btu.scheduler_daemon.reconcile.row_compile.compile_row", "is not declared runnable by BTU"),
	],
)
def test_undeclared_functions_are_refused_with_the_reason(bench, path, words):
	assert words in refusal(AppFiles(bench, False), path)


def test_an_apps_hooks_declare_only_its_own_functions(bench):
	# otherapp's btu_tasks says "myapp.*": that does not declare myapp.tasks.plain.
	assert "is not declared runnable" in refusal(AppFiles(bench, False), "myapp.tasks.plain")


def test_the_escape_hatch_allows_any_function_defined_in_an_installed_app_only(bench):
	files = AppFiles(bench, True)
	for path in (
		"myapp.tasks.plain",
		"myapp.reports.monthly",
		"btu.scheduler_daemon.reconcile.row_compile.compile_row",
	):
		files.check(path)
	assert "not an installed app" in refusal(files, "os.system")
	assert "only imported" in refusal(files, "myapp.tasks.getoutput")
	assert "not a function defined with def" in refusal(files, "myapp.tasks.system")


def test_hooks_that_are_not_a_literal_list_are_named_and_decorators_still_count(bench):
	hooks = bench / "apps" / "myapp" / "myapp" / "hooks.py"
	for text in (
		'btu_tasks = [f"myapp.tasks.{n}" for n in ("plain",)]\n',
		'btu_tasks = ["myapp.tasks.plain"]\nbtu_tasks += []\n',
		"btu_tasks = 42\n",
	):
		hooks.write_text(text)
		files = AppFiles(bench, False)
		message = refusal(files, "myapp.tasks.plain")
		assert f"btu_tasks in {hooks}" in message and (
			"literal list of strings" in message or "not a string" in message
		)
		files.check("myapp.tasks.decorated")


def test_an_app_in_apps_txt_without_its_package_is_named(bench):
	(bench / "sites" / "apps.txt").write_text("myapp\nghost\n")
	message = refusal(AppFiles(bench, False), "ghost.tasks.run")
	assert "app ghost is listed in" in message and "apps/ghost/ghost does not exist" in message


def test_an_app_not_in_apps_txt_is_refused_though_its_files_exist(bench):
	(bench / "sites" / "apps.txt").write_text("frappe\nbtu\n")
	assert "'myapp' is not an installed app (frappe, btu)" in refusal(AppFiles(bench, False), "myapp.tasks.decorated")


def test_a_module_that_does_not_parse_is_named(bench):
	(bench / "apps" / "myapp" / "myapp" / "broken.py").write_text("def run(:\n")
	assert "broken.py cannot be read as Python" in refusal(AppFiles(bench, False), "myapp.broken.run")


def test_reading_imports_no_app_code(bench):
	write(
		bench / "apps" / "myapp" / "myapp" / "loud.py",
		"raise SystemExit('imported!')\n\n@runnable\ndef run():\n\tpass\n",
	)
	AppFiles(bench, False).check("myapp.loud.run")
	assert "myapp" not in sys.modules and "myapp.loud" not in sys.modules


def test_the_fingerprint_changes_with_the_apps_the_hooks_and_the_escape_hatch(bench):
	first = AppFiles(bench, False).fingerprint
	assert AppFiles(bench, False).fingerprint == first
	assert AppFiles(bench, True).fingerprint != first
	hooks = bench / "apps" / "myapp" / "myapp" / "hooks.py"
	hooks.write_text(hooks.read_text() + "# edited\n")
	edited = AppFiles(bench, False).fingerprint
	assert edited != first
	(bench / "sites" / "apps.txt").write_text("frappe\nbtu\nmyapp\n")
	assert AppFiles(bench, False).fingerprint != edited


@pytest.mark.parametrize(
	"path",
	["myapp.tests.fixtures.decorated", "myapp.reports.tests.fixtures.decorated", "myapp.test_helpers.decorated",
	 "btu.btu_core.tests.sample_tasks.say_hello"],
)  # fmt: skip
def test_a_declared_test_fixture_runs_only_where_the_site_runs_tests(bench, path):
	"""Fixtures ship inside the app's package: a production site must not run them, whatever declares them."""
	package = bench / "apps" / "myapp" / "myapp"
	for module in ("tests/fixtures.py", "reports/tests/fixtures.py", "test_helpers.py"):
		write(package / module, "from btu import runnable\n\n@runnable\ndef decorated():\n\tpass\n")
	files = AppFiles(bench, True)  # not even the escape hatch lets a fixture run in production
	message = refusal(files, path)
	assert "a test module of app" in message
	assert "allow_tests" in message
	files.check(path, allow_tests=True)


@pytest.mark.parametrize("path", ["myapp.contests.run", "myapp.testsuite.run", "myapp.attest.run"])
def test_a_module_named_like_a_test_is_not_one(bench, path):
	package = bench / "apps" / "myapp" / "myapp"
	write(package / f"{path.split('.')[1]}.py", "from btu import runnable\n\n@runnable\ndef run():\n\tpass\n")
	AppFiles(bench, False).check(path)
