"""No input gets a traceback: every whitelisted BTU method, and Frappe's REST create and update of every BTU DocType,
answers any value of any parameter or field with success or a 4xx naming what is wrong, never a 5xx, and stores no
row its DocType's own checks refuse; as each kind of user (issue 41, item 3).

The inputs are hypothesis's, derandomized (the same ones every run, so a failure reproduces and none flakes), mixed
from hostile values (1 MB of text, JSON nested 10,000 deep, NaN and infinities, years 1 and 9999, huge integers,
control characters, look-alike and SQL text, objects where text belongs) and valid ones (the names of real Tasks,
Schedules, Run Requests, incidents and alert rules), so a call also gets past its first check. A call is made as
Frappe's handler makes it (`frappe.is_whitelisted`, then `frappe.call`), and its answer's status is Frappe's own:
the exception's http_status_code, 500 without one.
"""

from __future__ import annotations

import importlib
import inspect
import pkgutil
import sys
from collections import Counter

import frappe
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st

import btu.btu_core
from btu.btu_core import field_bounds
from btu.btu_core.tests.utils import SAMPLES, delete_committed, make_schedule, make_task, make_user

try:
	from frappe.tests import IntegrationTestCase
except ImportError:
	from frappe.tests.utils import FrappeTestCase as IntegrationTestCase

ROLES = {
	"Guest": None,
	"Website User": ("btu-fuzz-website@example.com", ()),
	"Desk user without BTU roles": ("btu-fuzz-desk@example.com", ("BTU Fuzz Desk Role",)),
	"BTU Metrics Reader": ("btu-fuzz-metrics@example.com", ("BTU Metrics Reader",)),
	"BTU Manager": ("btu-fuzz-manager@example.com", ("BTU Manager",)),
	"System Manager": ("btu-fuzz-sysman@example.com", ("System Manager",)),
}
EXAMPLES = 8
# Methods with no parameter to vary, or whose valid calls wait 5 s for a scheduler's answer when none runs.
FEWER = {"resync": 2, "ping": 1, "status": 1, "upgrade_report": 1}
DOCTYPES = (
	"BTU Task",
	"BTU Task Schedule",
	"BTU Calendar",
	"BTU Configuration",
	"BTU Run Request",
	"BTU Task Log",
	"BTU Alert Incident",
)
LAYOUT = ("Section Break", "Column Break", "Tab Break", "HTML", "Button", "Heading", "Fold")
BIG = "x" * 1_000_000
HOSTILE_TEXT = (
	BIG,
	"[" * 10_000 + "]" * 10_000,
	'{"a":' * 5_000 + "1" + "}" * 5_000,
	"{not json",
	"NaN",
	"inf",
	"-Infinity",
	"1e400",
	"9" * 5_000,
	"0001-01-01T00:00:00Z",
	"9999-12-31T23:59:59Z",
	"0000-00-00 00:00:00",
	"2026-02-30 25:61:61",
	"' OR 1=1 -- ",
	"%",
	"\x00\x01\x1f",
	"<script>alert(1)</script>",
	"BTU-ТASK",  # a Cyrillic T
	"𝔘𝔫𝔦𝔠𝔬𝔡𝔢 ☃",
	"",
	" ",
)
HOSTILE = st.one_of(
	st.none(),
	st.booleans(),
	st.integers(min_value=-(2**80), max_value=2**80),
	st.floats(allow_nan=True, allow_infinity=True),
	st.sampled_from(HOSTILE_TEXT),
	st.text(max_size=30),
	st.lists(st.text(max_size=5), max_size=3),
	st.dictionaries(st.text(max_size=5), st.text(max_size=5), max_size=3),
)


def fuzz_settings(examples: int):
	"""hypothesis's settings for `examples` inputs: the same ones every run (derandomized, no example database), none
	shrunk (a failure names its input), no deadline (a valid call may wait on the database or Redis)."""
	return settings(
		max_examples=examples,
		derandomize=True,
		database=None,
		deadline=None,
		phases=(Phase.explicit, Phase.generate),
		suppress_health_check=list(HealthCheck),
	)


def whitelisted_btu_functions() -> list:
	"""Every function BTU whitelists (its modules imported, tests and patches aside)."""
	for module in pkgutil.walk_packages(btu.btu_core.__path__, "btu.btu_core."):
		if ".tests" not in module.name and ".patches" not in module.name:
			importlib.import_module(module.name)
	return sorted(
		(
			fn
			for fn in frappe.whitelisted
			if getattr(fn, "__module__", "").startswith("btu.") and "." not in fn.__qualname__
		),
		key=lambda fn: f"{fn.__module__}.{fn.__name__}",
	)


def status_of(exc: BaseException) -> int:
	"""The HTTP status Frappe's handler answers `exc` with (frappe.app.handle_exception)."""
	return getattr(exc, "http_status_code", 500)


class TestNoInputGetsATraceback(IntegrationTestCase):
	@classmethod
	def setUpClass(cls):
		super().setUpClass()
		frappe.set_user("Administrator")
		if not frappe.db.exists("Role", "BTU Fuzz Desk Role"):
			frappe.get_doc({"doctype": "Role", "role_name": "BTU Fuzz Desk Role", "desk_access": 1}).insert()
		for user in ROLES.values():
			if user:
				make_user(*user)
		task = make_task(arguments='{"name": "Ada"}')
		task.append("alert_rules", {"event": "Failure", "by_email": 0, "by_bell": 1, "role": "BTU Manager"})
		task.save()
		schedule = make_schedule(task.name)
		request = frappe.get_doc(
			{
				"doctype": "BTU Run Request",
				"origin": "Retry",
				"status": "Pending",
				"task": task.name,
				"schedule": schedule.name,
				"run_at": frappe.utils.now_datetime(),
			}
		).insert(ignore_permissions=True)
		log = frappe.get_doc(
			{"doctype": "BTU Task Log", "task": task.name, "schedule": schedule.name, "status": "Succeeded"}
		).insert(ignore_permissions=True)
		incident = frappe.get_doc(
			{"doctype": "BTU Alert Incident", "status": "Open", "kind": "Failure", "task": task.name}
		).insert(ignore_permissions=True)
		frappe.db.commit()
		cls.addClassCleanup(delete_committed, task.name)
		cls.addClassCleanup(frappe.db.delete, "BTU Alert Incident", {"task": task.name})
		cls.valid = {
			"task": task.name,
			"schedule": schedule.name,
			"request": request.name,
			"incident": incident.name,
			"log": log.name,
			"rule": task.alert_rules[0].name,
			"doctype": "BTU Task",
			"name": task.name,
			"on": "webserver",
			"at": "2030-01-01 09:30:00",
			"start": "2026-11-01T00:00:00Z",
			"end": "2026-11-02T00:00:00Z",
			"slot": "2030-01-01T02:30:00Z",
			"chained": [],
			"doc": {"doctype": "BTU Task Schedule", "task": task.name, "run_frequency": "Daily", "hour": 2},
		}
		cls.tried: Counter = Counter()
		cls.rest_tried: Counter = Counter()
		cls.wrong: Counter = Counter({"answered 5xx": 0, "stored a row its DocType refuses": 0})

	@classmethod
	def tearDownClass(cls):
		frappe.set_user("Administrator")
		frappe.db.rollback()
		super().tearDownClass()
		per_method = sorted(set(cls.tried.values()))
		sys.stdout.write(
			f"\nfuzz: {sum(cls.tried.values())} inputs to {len({m for m, _ in cls.tried})} whitelisted methods as "
			f"{len(ROLES)} roles ({'-'.join(map(str, per_method[:1] + per_method[-1:]))} per method and role), "
			f"{sum(cls.rest_tried.values())} REST creates and updates of {len({key[0] for key in cls.rest_tried})} "
			f"DocTypes ({max(cls.rest_tried.values(), default=0)} per DocType, action and role): "
			f"{', '.join(f'{count} {what}' for what, count in cls.wrong.items())}\n"
		)

	def tearDown(self):
		frappe.set_user("Administrator")
		frappe.db.rollback()

	# -- the calls ---------------------------------------------------------------------------------------------------

	def act_as(self, role: str) -> None:
		frappe.set_user("Guest" if ROLES[role] is None else ROLES[role][0])

	def answer(self, call, what: str) -> None:
		"""Run `call` as Frappe's handler would; fail on a 5xx or on a stored row its DocType refuses."""
		before = self.rows()
		try:
			call()
		except Exception as exc:
			if status_of(exc) >= 500:
				self.wrong["answered 5xx"] += 1
				raise AssertionError(
					f"{what}: HTTP {status_of(exc)} from {type(exc).__name__}: {str(exc)[:300]}"
				) from exc
		else:
			self.assert_stored_rows_valid(before, what)
		finally:
			frappe.set_user("Administrator")
			frappe.db.rollback()
			frappe.local.message_log = []

	@staticmethod
	def rows() -> dict[str, dict]:
		"""Each BTU DocType's rows as this transaction sees them: name and modified."""
		found = {}
		for doctype in DOCTYPES:
			if frappe.get_meta(doctype).issingle:
				query = "select doctype, value from tabSingles where doctype = %s and field = 'modified'"
				found[doctype] = dict(frappe.db.sql(query, doctype))
			else:
				found[doctype] = dict(frappe.db.sql(f"select name, modified from `tab{doctype}`"))
		return found

	def assert_stored_rows_valid(self, before: dict[str, dict], what: str) -> None:
		"""Every row the call wrote passes its DocType's checks: the field bounds and its controller's validate."""
		frappe.set_user("Administrator")
		for doctype, rows in self.rows().items():
			for name, modified in rows.items():
				if before[doctype].get(name) == modified:
					continue
				doc = frappe.get_doc(doctype, name)
				try:
					field_bounds.check(doc)
					doc.run_method("validate")
				except Exception as exc:
					self.wrong["stored a row its DocType refuses"] += 1
					raise AssertionError(f"{what}: stored {doctype} {name} that fails its checks: {exc}") from exc

	# -- whitelisted methods -----------------------------------------------------------------------------------------

	def arguments(self, fn) -> st.SearchStrategy:
		"""Each parameter of `fn`: a hostile value, the valid one where there is one, or left out (its default)."""
		fields = {}
		for name, parameter in inspect.signature(fn).parameters.items():
			choices = [HOSTILE]
			if name in self.valid:
				choices.append(st.just(self.valid[name]))
			value = st.one_of(*choices)
			if parameter.default is not inspect.Parameter.empty:
				value = st.one_of(value, st.just(parameter.default))
			fields[name] = value
		return st.fixed_dictionaries(fields)

	def fuzz_method(self, fn, role: str) -> None:
		label = f"{fn.__module__}.{fn.__name__}"

		@fuzz_settings(FEWER.get(fn.__name__, EXAMPLES))
		@given(self.arguments(fn))
		def attempt(kwargs):
			self.tried[label, role] += 1

			def call():
				self.act_as(role)
				frappe.local.form_dict = frappe._dict(kwargs)
				frappe.is_whitelisted(fn)
				frappe.call(fn, **kwargs)

			self.answer(call, f"{label}({shown(kwargs)}) as {role}")

		attempt()

	def test_every_whitelisted_method_as_every_role(self):
		functions = whitelisted_btu_functions()
		self.assertGreaterEqual(len(functions), 25, [fn.__name__ for fn in functions])
		for fn in functions:
			for role in ROLES:
				with self.subTest(method=fn.__name__, role=role):
					self.fuzz_method(fn, role)

	# -- REST create and update --------------------------------------------------------------------------------------

	def fields(self, doctype: str) -> list:
		return [df for df in frappe.get_meta(doctype).fields if df.fieldtype not in LAYOUT]

	def changes(self, doctype: str) -> st.SearchStrategy:
		"""Up to four fields of `doctype` (a child table's as one row) set to hostile values."""
		strategies = {}
		for df in self.fields(doctype):
			if df.fieldtype == "Table":
				row = st.fixed_dictionaries(
					{}, optional={child.fieldname: HOSTILE for child in self.fields(df.options)}
				)
				strategies[df.fieldname] = st.lists(row, min_size=1, max_size=2)
			else:
				strategies[df.fieldname] = HOSTILE
		names = sorted(strategies)
		return st.lists(st.sampled_from(names), min_size=1, max_size=4, unique=True).flatmap(
			lambda chosen: st.fixed_dictionaries({name: strategies[name] for name in chosen})
		)

	def base(self, doctype: str) -> dict:
		"""A document of `doctype` that saves as it is, to which the hostile values are added."""
		valid = {
			"BTU Task": {"desc_short": "fuzz", "function_string": f"{SAMPLES}.say_hello", "queue_name": "default"},
			"BTU Task Schedule": {"task": self.valid["task"], "run_frequency": "Daily", "hour": 2, "time_zone": "UTC"},
			"BTU Calendar": {"calendar_name": f"fuzz {frappe.generate_hash(length=6)}"},
			"BTU Run Request": {"origin": "Retry", "status": "Pending", "task": self.valid["task"]},
			"BTU Task Log": {"task": self.valid["task"], "status": "Succeeded"},
			"BTU Alert Incident": {"status": "Open", "kind": "Failure", "task": self.valid["task"]},
		}
		return {"doctype": doctype, **valid.get(doctype, {})}

	def fuzz_rest(self, doctype: str, action: str, role: str) -> None:
		from frappe import client

		existing = {
			"BTU Task": self.valid["task"],
			"BTU Task Schedule": self.valid["schedule"],
			"BTU Run Request": self.valid["request"],
			"BTU Alert Incident": self.valid["incident"],
			"BTU Task Log": self.valid["log"],
			"BTU Configuration": "BTU Configuration",
		}

		@fuzz_settings(EXAMPLES)
		@given(self.changes(doctype))
		def attempt(changes):
			self.rest_tried[doctype, action, role] += 1

			def call():
				if action == "insert":
					doc = {**self.base(doctype), **changes}
					self.act_as(role)
					client.insert(doc)
				else:
					doc = {**frappe.get_doc(doctype, existing[doctype]).as_dict(), **changes}
					self.act_as(role)
					client.save(doc)

			self.answer(call, f"frappe.client.{action}({doctype}, {shown(changes)}) as {role}")

		attempt()

	def test_every_doctype_created_and_updated_through_rest_as_every_role(self):
		for doctype in DOCTYPES:
			actions = ("save",) if frappe.get_meta(doctype).issingle else ("insert", "save")
			for action in actions:
				if action == "save" and doctype == "BTU Calendar":
					continue  # no calendar exists to update; its insert covers its fields
				for role in ROLES:
					with self.subTest(doctype=doctype, action=action, role=role):
						self.fuzz_rest(doctype, action, role)


class TestTheReportedInputs(IntegrationTestCase):
	"""The inputs issue 41 found answered with a 500 and a traceback (or, the last, stored): each a 4xx naming the
	field and what it may hold, and nothing stored."""

	@classmethod
	def setUpClass(cls):
		super().setUpClass()
		frappe.set_user("Administrator")
		cls.task = make_task().name
		cls.schedule = make_schedule(cls.task).name
		frappe.db.commit()
		cls.addClassCleanup(delete_committed, cls.task)

	def tearDown(self):
		frappe.set_user("Administrator")
		frappe.db.rollback()

	def refused(self, call, *words: str) -> None:
		with self.assertRaises(Exception) as caught:
			call()
		self.assertTrue(
			400 <= status_of(caught.exception) < 500, f"{type(caught.exception).__name__}: {caught.exception}"
		)
		for word in words:
			self.assertIn(word, str(caught.exception))

	def test_each_reported_input_gets_a_4xx_naming_the_field(self):
		from frappe import client

		from btu.btu_core import api

		deep = "[" * 10_000 + "]" * 10_000
		cases = {
			"Task arguments 10,000 deep": (
				lambda: client.insert({**self.task_values(), "arguments": '{"a": ' + deep + "}"}),
				("arguments", "deep"),
			),
			"Task arguments of 1 MB": (
				lambda: client.insert({**self.task_values(), "arguments": '{"a": "' + "x" * 1_000_000 + '"}'}),
				("arguments",),
			),
			"Schedule argument_overrides 10,000 deep": (
				lambda: client.save(
					{**frappe.get_doc("BTU Task Schedule", self.schedule).as_dict(), "argument_overrides": deep}
				),
				("argument_overrides",),
			),
			"retry_backoff_factor NaN": (
				lambda: api.set_retry_policy("BTU Task", self.task, retry_backoff_factor="NaN"),
				("retry_backoff_factor",),
			),
			"a pause note of 1 MB": (lambda: api.pause(self.schedule, "x" * 1_000_000), ("pause_note", "bytes")),
			"chained tasks not JSON": (lambda: api.set_chained_tasks(self.task, "{not json"), ("chained", "JSON")),
			"chained tasks 10,000 deep": (lambda: api.set_chained_tasks(self.task, deep), ("chained", "deep")),
			"run_once_at in year 1": (lambda: api.run_once_at(self.task, "0001-01-01T00:00:00Z"), ("at", "1900")),
			"run_once_at in year 9999": (lambda: api.run_once_at(self.task, "9999-12-31T23:59:59Z"), ("at", "9998")),
		}
		for case, (call, words) in cases.items():
			with self.subTest(case=case):
				before = frappe.db.count("BTU Task"), frappe.db.count("BTU Task Schedule")
				self.refused(call, *words)
				frappe.db.rollback()
				self.assertEqual((frappe.db.count("BTU Task"), frappe.db.count("BTU Task Schedule")), before)

	def task_values(self) -> dict:
		return {
			"doctype": "BTU Task",
			"desc_short": "reported",
			"function_string": f"{SAMPLES}.say_hello",
			"queue_name": "default",
		}


def shown(values) -> str:
	"""Arguments as a failure names them: long values cut."""
	text = repr(values)
	return text if len(text) <= 300 else text[:300] + f"... ({len(text)} characters)"
