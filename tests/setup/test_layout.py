"""The shape of the package (docs/ARCHITECTURE.md): who may import whom, and how large a unit may grow.

Read from the source with `ast`, so an import inside a function counts as much as one at the top. The dev
tooling (`devbench/` at the repository's root, with its own app `btu_demo`) is not part of the product:
nothing in `btu` imports it and btu's hooks.py declares nothing of it. btu/shared holds only what both halves load;
Frappe-free code only the Frappe side uses lives beside its user in btu_core (FRAPPE_FREE), importable without Frappe.
"""

from __future__ import annotations

import ast
import json
import re
import subprocess
import sys
from fnmatch import fnmatchcase
from pathlib import Path

import pytest

pytestmark = pytest.mark.versions

REPO = Path(__file__).resolve().parents[2]
BTU = REPO / "btu"
DEVBENCH = REPO / "devbench"
# The dev tooling's top-level names: the dev bench package and the dev bench's own app (devbench/apps/btu_demo).
DEV_TOOLING = ("devbench", "btu_demo", "btu.devbench")
# package -> what it must never import (a name, or a prefix followed by ".")
FORBIDDEN = {
	"shared": ("frappe", "btu.scheduler_daemon", "btu.btu_core", *DEV_TOOLING),
	"scheduler_daemon": ("frappe", "btu.btu_core", *DEV_TOOLING),
	"btu_core": ("btu.scheduler_daemon", *DEV_TOOLING),  # its tests aside: the end-to-end test runs the scheduler
}
# The dev tooling runs without Frappe too (tier 1, the demo): it makes BTU's tables from the DocType JSON.
DEVBENCH_FORBIDDEN = ("frappe", "btu.btu_core")
MAX_FUNCTION_LINES = 60
MAX_CLASS_LINES = 300


def modules(package: str) -> list[Path]:
	return sorted(path for path in (BTU / package).rglob("*.py") if "tests" not in path.relative_to(BTU).parts)


def imported(path: Path) -> set[str]:
	names = set()
	for node in ast.walk(ast.parse(path.read_text(), str(path))):
		if isinstance(node, ast.Import):
			names.update(alias.name for alias in node.names)
		elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
			names.add(node.module)
			names.update(f"{node.module}.{alias.name}" for alias in node.names)
	return names


def forbidden_imports(paths, forbidden) -> list[str]:
	found = []
	for path in paths:
		for name in imported(path):
			if any(name == bad or name.startswith(bad + ".") for bad in forbidden):
				found.append(f"{path.relative_to(REPO)} imports {name}")
	return found


@pytest.mark.parametrize("package", FORBIDDEN)
def test_package_imports_stay_inside_its_boundary(package):
	found = forbidden_imports(modules(package), FORBIDDEN[package])
	assert not found, "\n".join(found)


def test_no_module_of_btu_imports_the_dev_tooling():
	# Every file of the package, its tests, hooks.py and commands.py included: the product's import graph ends in btu.
	# Source files, not the folder: a checkout from before the move keeps an untracked __pycache__ there.
	assert not list((BTU / "devbench").rglob("*.py")), (
		"the dev bench lives at the repository's root, outside the product"
	)
	found = forbidden_imports(sorted(BTU.rglob("*.py")), DEV_TOOLING)
	assert not found, "\n".join(found)


def test_the_dev_tooling_imports_no_frappe():
	found = forbidden_imports(sorted(DEVBENCH.rglob("*.py")), DEVBENCH_FORBIDDEN)
	assert not found, "\n".join(found)


def test_setup_installs_no_dev_tooling():
	# setup.py's packages=find_packages(include=[...]): its patterns (fnmatch, as setuptools reads them) take btu only.
	tree = ast.parse((REPO / "setup.py").read_text())
	(call,) = [node.value for node in ast.walk(tree) if isinstance(node, ast.keyword) and node.arg == "packages"]
	assert isinstance(call, ast.Call) and ast.unparse(call.func) == "find_packages"
	(include,) = [ast.literal_eval(keyword.value) for keyword in call.keywords if keyword.arg == "include"]
	assert any(fnmatchcase("btu.scheduler_daemon", pattern) for pattern in include)
	for name in ("devbench", "devbench.bench", "btu_demo"):
		assert not any(fnmatchcase(name, pattern) for pattern in include), name


def test_production_hooks_declare_nothing_of_the_dev_tooling():
	tree = ast.parse((BTU / "hooks.py").read_text())
	strings = [node.value for node in ast.walk(tree) if isinstance(node, ast.Constant) and isinstance(node.value, str)]
	named = [text for text in strings if any(text == name or text.startswith(name + ".") for name in DEV_TOOLING)]
	assert not named, f"btu/hooks.py names the dev tooling: {named}"
	# Every btu_tasks entry is a module of the product that exists: no stale glob declares a moved-out module.
	(tasks,) = [
		node.value for node in tree.body if isinstance(node, ast.Assign) and ast.unparse(node.targets[0]) == "btu_tasks"
	]
	for entry in ast.literal_eval(tasks):
		module = entry.rsplit(".", 1)[0] if not entry.endswith(".*") else entry[: -len(".*")]
		base = REPO / module.replace(".", "/")
		assert module.startswith("btu.") and (base.with_suffix(".py").is_file() or (base / "__init__.py").is_file()), (
			entry
		)


def test_importing_the_scheduler_loads_no_frappe_and_no_dev_tooling():
	code = (
		"import sys, pkgutil, importlib, btu.scheduler_daemon, btu.shared\n"
		"def load(*packages):\n"
		"    for package in packages:\n"
		"        for info in pkgutil.walk_packages(package.__path__, package.__name__ + '.'):\n"
		"            if not info.name.endswith('.__main__'):  # runs the CLI\n"
		"                importlib.import_module(info.name)\n"
		"load(btu.scheduler_daemon, btu.shared)\n"
		"print(sorted(m for m in sys.modules if m.split('.')[0] in ('devbench', 'btu_demo')))\n"
		"import devbench\n"
		"load(devbench)\n"
		"print(sorted(m for m in sys.modules if m == 'frappe' or m.startswith(('frappe.', 'btu.btu_core'))))\n"
	)
	out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=REPO).stdout
	assert out.split("\n")[:2] == ["[]", "[]"], out


def test_no_function_or_class_outgrows_one_screen_of_reading():
	found = []
	for path in sorted([*BTU.rglob("*.py"), *DEVBENCH.rglob("*.py")]):
		for node in ast.walk(ast.parse(path.read_text(), str(path))):
			if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
				lines = node.end_lineno - node.lineno + 1
				limit = MAX_CLASS_LINES if isinstance(node, ast.ClassDef) else MAX_FUNCTION_LINES
				if lines > limit:
					found.append(f"{path.relative_to(REPO)}:{node.lineno} {node.name}: {lines} lines (limit {limit})")
	assert not found, "\n".join(found)


# -- import circles -----------------------------------------------------------------

# Imports made inside a function on purpose, for start-up cost: (importer, imported module) -> why. They are left out
# of the circle check below, and on the Frappe side (FRAPPE_SIDE) every import of a btu module inside a function must
# be one of them: an import moved into a function to dodge a circle would otherwise hide the circle from the check.
LAZY = {
	(
		"btu",
		"btu.btu_core.runs.enqueue",
	): "btu.enqueue_at, enqueue_in and cancel are looked up on first use: the scheduler "
	"process imports btu, which must never import frappe",
	(
		"btu.commands",
		"btu.btu_core.task_runner",
	): "preload_run_path: imported in a bench worker only, so its work-horses "
	"inherit it; bench imports every app's commands module for every command",
	("btu.commands", "btu.scheduler_daemon.commands"): "bench imports every app's commands module for every command: "
	"a command's code is imported when it runs",
	("btu.commands", "btu.scheduler_daemon.cli"): "as above: bench btu-scheduler's code, when it runs",
	("btu.commands", "btu.btu_core.upgrade.declare"): "as above: bench btu-declare-tasks's code, when it runs",
	(
		"btu.commands",
		"btu.scheduler_daemon.leading.worker_candidate",
	): "as above: a worker's scheduler candidate, in a worker",
	("btu.btu_core.task_runner", "btu.btu_core.runs.frappe_jobs"): "Frappe job runs only: it loads the schedule rules, "
	"which a Task's run must not load before its call (btu_core/tests/test_run_path.py)",
	("btu.btu_core.runs.retries", "btu.btu_core.schedules.spec"): "a retry's next fire, after the call: the task "
	"runner imports retries before every call, and a spec loads the schedule rules",
	("btu.btu_core.runs.backfills", "btu.btu_core.schedules.spec"): "a backfill's slots: the task runner imports "
	"backfills before every call (release_next), and a spec loads the schedule rules",
	(
		"btu.btu_core.alerts",
		"btu.btu_core.alerts.delivery",
	): "the webhook job's path before alerts was a package, for jobs "
	"queued across the upgrade: on its first use only, since the package's __init__ runs before each of its modules",
	(
		"btu.btu_core.alerts",
		"btu.btu_core.alerts.watchdog",
	): "as above: the watchdog's path until migrate resyncs its row",
	(
		"btu.btu_core.alerts.webhooks",
		"btu.btu_core.alerts.webhook_post",
	): "a webhook's check and POST only: every run's "
	"end imports alerts, and the POST's module is not for the run path (test_run_path)",
}


def module_name(path: Path) -> str:
	parts = path.relative_to(BTU.parent).with_suffix("").parts
	return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


MODULES = {module_name(path): path for path in BTU.rglob("*.py")}


def type_checking_only(tree: ast.AST) -> set[int]:
	"""The nodes under `if TYPE_CHECKING:`, which never run."""
	skipped = set()
	for node in ast.walk(tree):
		if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
			skipped.update(id(inner) for statement in node.body for inner in ast.walk(statement))
	return skipped


def btu_imports(name: str, type_only: bool = False) -> list[tuple[str, list[str], bool]]:
	"""The btu modules module `name` imports: for each import, the module it names (`from a import b` names module a.b
	when there is one, else a), the packages above it that Python runs first (not the importer's own), and whether the
	import is inside a function. `type_only`: the imports under `if TYPE_CHECKING:` too."""
	path = MODULES[name]
	tree = ast.parse(path.read_text(), str(path))
	skipped = set() if type_only else type_checking_only(tree)
	found = []

	def visit(node, in_function):
		for child in ast.iter_child_nodes(node):
			inside = in_function or isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda))
			if id(child) not in skipped and isinstance(child, (ast.Import, ast.ImportFrom)):
				for target in import_targets(name, path, child):
					parts = target.split(".")
					above = [".".join(parts[:depth]) for depth in range(len(parts) - 1, 1, -1)]
					found.append(
						(
							target,
							[module for module in above if module in MODULES and not name.startswith(module + ".")],
							inside,
						)
					)
			visit(child, inside)

	visit(tree, False)
	return [(target, above, inside) for target, above, inside in found if target in MODULES and target != name]


def import_targets(name: str, path: Path, node) -> list[str]:
	if isinstance(node, ast.Import):
		return [alias.name for alias in node.names]
	base = node.module or ""
	if node.level:
		package = name.split(".") if path.name == "__init__.py" else name.split(".")[:-1]
		base = ".".join(package[: len(package) - node.level + 1] + ([node.module] if node.module else []))
	return [f"{base}.{alias.name}" if f"{base}.{alias.name}" in MODULES else base for alias in node.names]


def import_circles(edges: dict[str, set[str]]) -> list[list[str]]:
	"""The strongly connected groups of more than one module (Tarjan), each sorted."""
	index, low, stack, on_stack, circles = {}, {}, [], set(), []

	def connect(module):
		index[module] = low[module] = len(index)
		stack.append(module)
		on_stack.add(module)
		for other in sorted(edges.get(module, ())):
			if other not in index:
				connect(other)
				low[module] = min(low[module], low[other])
			elif other in on_stack:
				low[module] = min(low[module], index[other])
		if low[module] == index[module]:
			group = []
			while True:
				other = stack.pop()
				on_stack.discard(other)
				group.append(other)
				if other == module:
					break
			if len(group) > 1:
				circles.append(sorted(group))

	for module in sorted(MODULES):
		if module not in index:
			connect(module)
	return circles


def test_no_import_circle_among_btu_modules():
	edges = {}
	for name in MODULES:
		for target, above, _inside in btu_imports(name):
			if (name, target) not in LAZY:
				edges.setdefault(name, set()).update([target, *above])
	circles = import_circles(edges)
	assert not circles, "import circles (module-level and in-function imports both count):\n" + "\n".join(
		" <-> ".join(group) for group in circles
	)


def test_no_import_circle_in_the_scheduler_or_the_shared_contract_not_even_for_types():
	"""A reader follows the type annotations too: in the scheduler and the contract, a module's types come from
	below it, never from a module that imports it."""
	edges = {}
	for name in MODULES:
		if name.startswith(("btu.scheduler_daemon", "btu.shared")) and not is_test(name):
			for target, above, _inside in btu_imports(name, type_only=True):
				if (name, target) not in LAZY:
					edges.setdefault(name, set()).update([target, *above])
	circles = import_circles(edges)
	assert not circles, "import circles (type-only imports count):\n" + "\n".join(" <-> ".join(g) for g in circles)


# The scheduler's rooms (its folders, and its top-level modules), lowest first: a module imports only from its own
# room or one below it, so the rooms read bottom up (docs/ARCHITECTURE.md draws them in this order).
SCHEDULER_ROOMS = ("log", "reads", "store", "operations", "reconcile", "rpc", "leading", "commands", "cli", "__main__")


def scheduler_room(name: str) -> str:
	return name.split(".")[2]


def test_the_schedulers_rooms_import_only_downward():
	upward = []
	for name in MODULES:
		if name.startswith("btu.scheduler_daemon.") and not is_test(name):
			room = scheduler_room(name)
			for target, _above, _inside in btu_imports(name, type_only=True):
				if target.startswith("btu.scheduler_daemon.") and scheduler_room(target) != room:
					if SCHEDULER_ROOMS.index(scheduler_room(target)) > SCHEDULER_ROOMS.index(room):
						upward.append(f"{name} -> {target}")
	assert upward == [], f"imports up the rooms {SCHEDULER_ROOMS}:\n" + "\n".join(sorted(set(upward)))


def test_no_module_rebinds_its_globals_at_run_time():
	"""What a module names (a key, a limit, a form) is fixed at import: a value that depends on the bench (its key
	names: `btu.shared.keys.Keys`) is an object made from the bench and passed in, never a module global that
	someone must have rewritten first."""
	found = []
	for name, path in MODULES.items():
		for node in ast.walk(ast.parse(path.read_text())):
			if isinstance(node, ast.Global):
				found.append(f"{name}:{node.lineno}: global {', '.join(node.names)}")
			elif isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "globals":
				found.append(f"{name}:{node.lineno}: globals()")
	assert found == [], "module globals rebound at run time:\n" + "\n".join(found)


def is_test(name: str) -> bool:
	return ".tests." in f"{name}." or name.rpartition(".")[2].startswith("test_")


def on_the_frappe_side(name: str) -> bool:
	"""The Frappe side's product code, where every import of a btu module inside a function is a LAZY one (the
	scheduler's are its CLI's, for start-up; tests import as they please)."""
	if is_test(name):
		return False
	return name in ("btu", "btu.hooks", "btu.commands") or name.startswith(("btu.btu_core.", "btu.patches."))


def test_an_import_inside_a_function_on_the_frappe_side_is_a_deliberate_one():
	lazy = {(name, target) for name in MODULES for target, _above, inside in btu_imports(name) if inside}
	unlisted = sorted(edge for edge in lazy if on_the_frappe_side(edge[0]) and edge not in LAZY)
	assert not unlisted, "imports inside functions not in LAZY (import at the top, or list it with why):\n" + "\n".join(
		f"{importer} imports {imported}" for importer, imported in unlisted
	)
	stale = sorted(set(LAZY) - lazy)
	assert not stale, f"LAZY lists imports no function makes any more: {stale}"


# -- btu/shared: the contract both halves import ------------------------------------

# The two halves whose product code (tests aside) must each load every module of btu/shared.
HALVES = {"scheduler_daemon": "btu.scheduler_daemon", "btu_core": "btu.btu_core"}
# Frappe-free modules of the Frappe side: only btu_core uses them, so they live beside their user, not in btu/shared.
# Tier 1 tests them without Frappe, so neither they nor the packages Python runs before them may import frappe, nor any
# other module of btu_core. A package named here: every module in it.
FRAPPE_FREE = (
	"btu.btu_core.alerts.overdue_slots",  # the watchdog's missed-fire arithmetic
	"btu.btu_core.alerts.webhook_post",  # alerts.webhooks' POST: the address checks, the signature, the deadline
	"btu.btu_core.insights.task_outcomes",  # insights.metrics' Redis hash of run outcomes and its Prometheus collector
	"btu.btu_core.runs.slot_claim",  # the task runner's slot lock, which tier 1's failover tests take too
	"btu.btu_core.schedules.hook_entries",  # declared_schedules' `btu_schedules` entries checked and mapped
	"btu.btu_core.upgrade.convert",  # the upgrade's converters of the original BTU's values
)


def is_shared(name: str) -> bool:
	return name == "btu.shared" or name.startswith("btu.shared.")


def shared_reach(importers) -> set[str]:
	"""The btu/shared modules that importing these modules loads: those they import (in a function too), the packages
	above each, and in turn what those import. A module only a shared module imports is part of how that one is
	defined (`schedule/cron` of `schedule`), so it is used where that one is."""
	reached, todo = set(), list(importers)
	while todo:
		for target, above, _inside in btu_imports(todo.pop()):
			for module in (target, *above):
				if is_shared(module) and module not in reached:
					reached.add(module)
					todo.append(module)
	return reached


@pytest.mark.parametrize("half", HALVES)
def test_every_shared_module_is_loaded_by_both_halves(half):
	package = HALVES[half]
	product = [name for name in MODULES if (name == package or name.startswith(package + ".")) and not is_test(name)]
	unused = sorted({name for name in MODULES if is_shared(name)} - shared_reach(product))
	assert not unused, (
		f"btu/shared holds what both halves import; {half} never loads these (move each beside its one user; a "
		"Frappe-free one on the Frappe side is listed in FRAPPE_FREE):\n" + "\n".join(unused)
	)


def frappe_free_modules() -> list[str]:
	found = []
	for entry in FRAPPE_FREE:
		inside = sorted(name for name in MODULES if name == entry or name.startswith(entry + "."))
		assert inside and entry.startswith("btu.btu_core."), f"FRAPPE_FREE names {entry}, no module of btu_core"
		found.extend(inside)
	return found


def test_the_frappe_free_modules_of_the_frappe_side_import_no_frappe():
	"""Read with ast: each module imports no frappe and, of btu, only btu/shared and other Frappe-free modules (in a
	function too); so do the packages above it up to btu.btu_core, at their top (what importing them runs: alerts'
	`__getattr__` imports the stored paths' modules on their first use only)."""
	free = frappe_free_modules()
	parts = [name.split(".") for name in free]
	checked = set(free) | {".".join(name[:depth]) for name in parts for depth in range(2, len(name))}
	found = []
	for name in sorted(checked):
		found += [
			f"{name} imports {other}" for other in sorted(imported(MODULES[name])) if other.split(".")[0] == "frappe"
		]
		for target, above, inside in btu_imports(name):
			if name in free or not inside:
				found += [
					f"{name} imports {other}"
					for other in (target, *above)
					if not is_shared(other) and other not in checked
				]
	assert not found, "\n".join(found)


def test_importing_the_frappe_free_modules_loads_no_frappe():
	code = (
		"import importlib, sys\n"
		f"for name in {frappe_free_modules()!r}:\n"
		"    importlib.import_module(name)\n"
		"print(sorted(m for m in sys.modules if m.split('.')[0] in ('frappe', 'devbench', 'btu_demo')))\n"
		"print(sorted(m for m in sys.modules if m.startswith('btu.scheduler_daemon')))\n"
	)
	result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO)
	assert result.returncode == 0, result.stderr
	assert result.stdout.split("\n")[:2] == ["[]", "[]"], result.stdout


# -- stored dotted paths ------------------------------------------------------------

DOTTED = re.compile(r"^btu(\.\w+)+$")
# hooks.py's override_whitelisted_methods maps a public path onto the code's: its keys name no module on purpose.
PUBLIC_ALIASES = "override_whitelisted_methods"


def stored_paths() -> list[tuple[str, str]]:
	"""(where, dotted path) of what Frappe, RQ and BTU's rows name by path: every btu path in hooks.py, and the paths
	the Frappe side and the shared contract write into jobs and rows (full-string constants), and the number cards'."""
	found = []
	hooks_tree = ast.parse((BTU / "hooks.py").read_text())
	aliases = set()
	for node in hooks_tree.body:
		if isinstance(node, ast.Assign) and any(
			getattr(target, "id", None) == PUBLIC_ALIASES for target in node.targets
		):
			aliases = {key.value for key in node.value.keys}
	sources = [BTU / "hooks.py", *sorted((BTU / "btu_core").rglob("*.py")), *sorted((BTU / "shared").rglob("*.py"))]
	for path in sources:
		if "tests" in path.relative_to(BTU).parts or path.name.startswith("test_"):
			continue
		for node in ast.walk(ast.parse(path.read_text(), str(path))):
			if isinstance(node, ast.Constant) and isinstance(node.value, str) and DOTTED.match(node.value):
				if node.value.startswith("btu.btu_core.") or path.name == "hooks.py":
					if node.value not in aliases:
						found.append((str(path.relative_to(BTU.parent)), node.value))
	for path in sorted((BTU / "btu_core" / "number_card").rglob("*.json")):
		method = json.loads(path.read_text()).get("method")
		if method:
			found.append((str(path.relative_to(BTU.parent)), method))
	return found


def defined_names(path: Path) -> set[str]:
	"""What a module defines at its top, and the names its module `__getattr__` answers (a path stored before a
	move)."""
	names = set()
	for node in ast.parse(path.read_text(), str(path)).body:
		if isinstance(node, ast.FunctionDef) and node.name == "__getattr__":
			names.update(
				inner.comparators[0].value
				for inner in ast.walk(node)
				if isinstance(inner, ast.Compare) and isinstance(inner.comparators[0], ast.Constant)
			)
		if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
			names.add(node.name)
		elif isinstance(node, ast.Assign):
			names.update(target.id for target in node.targets if isinstance(target, ast.Name))
	return names


def test_every_stored_dotted_path_names_a_definition():
	"""Each path names a function or class defined (not imported) in a module of this tree, or one its module's
	`__getattr__` answers: a module moved without its hooks, jobs or rows following fails here, not on a site."""
	paths = stored_paths()
	assert any(path == "btu.btu_core.task_runner.run_scheduled_task" for _where, path in paths), (
		"the job contract is read"
	)
	missing = []
	for where, path in paths:
		module, _, name = path.rpartition(".")
		if module not in MODULES or name not in defined_names(MODULES[module]):
			missing.append(f"{where}: {path}")
	assert not missing, "\n".join(missing)


def test_a_module_that_whitelists_has_real_annotations():
	"""Frappe's whitelist checks each argument against its parameter's annotation, and skips an annotation that is a
	string: under `from __future__ import annotations` a document name sent as a number or an object would reach SQL
	unchecked (MariaDB finds 'TS-000001' equal to 0.0)."""
	postponed = [
		str(path.relative_to(REPO))
		for path in BTU.rglob("*.py")
		if "/tests/" not in str(path)
		and "frappe.whitelist" in (text := path.read_text())
		and re.search(r"^from __future__ import annotations", text, re.M)
	]
	assert postponed == []


def test_every_path_docs_architecture_names_is_in_the_repo():
	"""docs/ARCHITECTURE.md names files and folders by their path under a folder it names nearby (`leading/engine.py`,
	`alerts/` then `(pause.py)`): each must be the end of a path in the repo, so a move that forgets the page fails."""
	text = (REPO / "docs" / "ARCHITECTURE.md").read_text()
	named = set(re.findall(r"`([A-Za-z0-9_./-]+(?:\.py|\.lua|\.md|/))`", text))
	paths = {str(path.relative_to(REPO)) + ("/" if path.is_dir() else "") for path in REPO.rglob("*")}
	paths = {path for path in paths if not path.startswith((".git/", ".venv"))}
	stale = sorted(name for name in named if not any(path == name or path.endswith("/" + name) for path in paths))
	assert stale == [], f"docs/ARCHITECTURE.md names paths the repo does not have: {stale}"
