"""Schedules an app declares in its hooks.py (`btu_schedules`), checked and mapped onto BTU Task and BTU
Task Schedule field values.

An entry is a dict: a `name` (its key, unique within the app), the app's own declared `function`, one
timing (`cron`, `frequency` with its helper fields, or `every` with `every_unit`), and optional
settings. `check_each` checks every entry of an app's list on its own before anything is written: the good ones
mapped, each bad one refused with why (naming the app, the entry and the key), so one bad entry costs only itself. Its
sibling `declared_schedules` writes the rows, and the controllers' own validation (the function declared runnable, the
queue, the retry bounds) still runs on every save. Frappe-free, so tier 1 tests it.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Any

from btu.shared import declared
from btu.shared.messages import InputError, _
from btu.shared.schedule import ScheduleError, ScheduleSpec
from btu.shared.schedule.frequency import HELPERS, frequency_to_cron

HOOK = "btu_schedules"
# The time_zone of a schedule that follows the site's System Settings zone (a row's empty time_zone).
SITE_ZONE = "site zone"
KEY = re.compile(r"[A-Za-z0-9_.-]{1,100}\Z")

# Hook key -> the BTU Task field it sets. Retries live on the Task; the Schedule's overrides stay blank.
TASK_KEYS = {
	"function": "function_string", "arguments": "arguments", "queue": "queue_name", "timeout": "max_task_duration",
	"description": "desc_short", "max_attempts": "max_attempts", "retry_on": "retry_on",
	"retry_delay_secs": "retry_delay_secs", "retry_backoff_factor": "retry_backoff_factor",
	"retry_max_delay_secs": "retry_max_delay_secs",
}  # fmt: skip
# Hook key -> the BTU Task Schedule field it sets (time_zone is the admin's once the row exists: see zone_after).
SCHEDULE_KEYS = {
	"cron": "cron_string", "frequency": "run_frequency", "minute": "minute", "hour": "hour",
	"day_of_week": "day_of_week", "day_of_month": "day_of_month", "month": "month", "every": "every",
	"every_unit": "every_unit", "time_zone": "time_zone", "catch_up_policy": "catch_up_policy",
	"catch_up_window": "catch_up_window", "catch_up_max": "catch_up_max", "overlap_policy": "overlap_policy",
	"jitter_secs": "jitter_secs",
}  # fmt: skip
KEYS = ("name", *TASK_KEYS, *SCHEDULE_KEYS)
HELPER_KEYS = ("minute", "hour", "day_of_week", "day_of_month", "month")
INT_KEYS = ("timeout", "max_attempts", "retry_delay_secs", "retry_max_delay_secs", "minute", "hour", "day_of_month",
	"every", "catch_up_window", "catch_up_max", "jitter_secs")  # fmt: skip
TEXT_KEYS = ("function", "queue", "description", "retry_on", "cron", "frequency", "day_of_week", "month", "every_unit",
	"time_zone", "catch_up_policy", "overlap_policy")  # fmt: skip

# The markers, set by the sync only: which app declares the row, under which key, and the zone the hook last gave.
MARKERS = ("declared_by_app", "declared_key")
# Fields the sync writes at every migrate: the Desk may not change them on a declared row.
TASK_FIELDS = (*MARKERS, *TASK_KEYS.values())
SCHEDULE_FIELDS = (
	*MARKERS, "declared_time_zone", "task", "run_frequency", "cron_string", "minute", "hour", "day_of_week",
	"day_of_month", "month", "every", "every_unit", "catch_up_policy", "catch_up_window", "catch_up_max",
	"overlap_policy", "jitter_secs",
	# The Schedule's overrides of the Task's queue, arguments and retries: blank, so the hook's apply.
	"queue_name", "argument_overrides", "max_attempts", "retry_on", "retry_delay_secs", "retry_backoff_factor",
	"retry_max_delay_secs",
)  # fmt: skip


class DeclaredScheduleError(InputError):
	"""A bad `btu_schedules` hook; str() names the app, the entry, the key and the fix.

	Its field is where in the hook ("btu_schedules in myapp/hooks.py, entry 'nightly', key 'cron'"), its value the
	one found there; a value worth showing is in the problem, written as the hook writes it.
	"""

	layout = _("{field}: {problem}")


@dataclass(frozen=True)
class Declared:
	"""One checked entry: the field values of its Task and its Schedule (None: the DocType's default)."""

	app: str
	key: str
	task: dict[str, Any]
	schedule: dict[str, Any]

	@property
	def time_zone(self) -> str:
		"""The zone the hook gives ("" for the site zone)."""
		return self.schedule["time_zone"] or ""


def where(app: str, key: Any = None, hook_key: str | None = None) -> str:
	"""The start of every message: the hook, and the entry and its key when known."""
	entry = f", entry {key!r}" if key is not None else ""
	return f"{HOOK} in {app}/hooks.py{entry}" + (f", key {hook_key!r}" if hook_key is not None else "")


@dataclass(frozen=True)
class Refused:
	"""An entry left out of a sync: its app, its name when it has a usable one (None: unknown), and why."""

	app: str
	key: str | None
	reason: str  # in English, for the migrate's output, btu.log and the status panel
	error: DeclaredScheduleError | None = (
		None  # the hook's own error, which the Desk shows translated (a save's refusal has none)
	)


def check_each(app: str, entries: Any) -> tuple[list[Declared], list[Refused]]:
	"""Every entry of `app`'s hook checked on its own: (the good ones mapped, the bad ones refused). A hook that is
	not a list refuses itself whole; of two entries with one name, the second is refused."""
	if entries is None:
		return [], []
	if not isinstance(entries, (list, tuple)):
		whole = DeclaredScheduleError(
			where(app),
			entries,
			_(
				'is a {kind}; write a list of dicts, e.g. {hook} = [{{"name": "nightly", '
				'"function": "{app}.tasks.nightly", "cron": "0 2 * * *"}}]'
			),
			kind=type(entries).__name__,
			hook=HOOK,
			app=app,
		)
		return [], [Refused(app, None, str(whole), whole)]
	checked, refused, seen = [], [], set()
	for index, entry in enumerate(entries):
		try:
			item = check_entry(app, entry, index)
			if item.key in seen:
				raise DeclaredScheduleError(
					where(app, item.key, "name"), item.key, _("two entries use this name; give each its own")
				)
		except DeclaredScheduleError as exc:
			key = (
				entry.get("name")
				if isinstance(entry, dict) and isinstance(entry.get("name"), str) and KEY.match(entry["name"])
				else None
			)
			refused.append(Refused(app, key, str(exc), exc))
			continue
		seen.add(item.key)
		checked.append(item)
	return checked, refused


def check_entry(app: str, entry: Any, index: int = 0) -> Declared:
	"""One entry checked and mapped onto Task and Schedule fields."""
	if not isinstance(entry, dict):
		raise DeclaredScheduleError(
			f"{where(app)}, item {index + 1}",
			entry,
			_('is a {kind}, not a dict; write {{"name": ..., "function": ..., ...}}'),
			kind=type(entry).__name__,
		)
	key = entry.get("name")
	if not isinstance(key, str) or not KEY.match(key):
		raise DeclaredScheduleError(
			f"{where(app)}, item {index + 1}, key 'name'",
			key,
			_(
				"{key!r} is not a name; give a stable name of letters, digits, '_', '-' or '.' (up to 100), "
				"unique within the app: it ties the entry to its rows across migrates"
			),
			key=key,
		)

	def at(hook_key: str) -> str:
		return where(app, key, hook_key)

	unknown = [name for name in entry if name not in KEYS]
	if unknown:
		raise DeclaredScheduleError(
			at(unknown[0]), entry[unknown[0]], _("is not a key of {hook}; use {keys}"), hook=HOOK, keys=", ".join(KEYS)
		)
	# None is a key left out (its default); any other value must have the key's type.
	for name in INT_KEYS:
		if entry.get(name) is not None and (isinstance(entry[name], bool) or not isinstance(entry[name], int)):
			raise DeclaredScheduleError(at(name), entry[name], _("{value!r} is not a whole number"), value=entry[name])
	for name in TEXT_KEYS:
		if entry.get(name) is not None and not isinstance(entry[name], str):
			raise DeclaredScheduleError(at(name), entry[name], _("{value!r} is not text"), value=entry[name])
	factor = entry.get("retry_backoff_factor")
	if factor is not None and (isinstance(factor, bool) or not isinstance(factor, (int, float))):
		raise DeclaredScheduleError(at("retry_backoff_factor"), factor, _("{value!r} is not a number"), value=factor)
	_check_function(app, entry.get("function"), at)
	task = {field: entry.get(name) for name, field in TASK_KEYS.items()}
	task["arguments"] = _arguments(entry.get("arguments"), at)
	task["desc_short"] = entry.get("description") or f"{app}: {key}"
	if len(task["desc_short"]) > 140:
		raise DeclaredScheduleError(
			at("description"), task["desc_short"], _("is longer than 140 characters; shorten it")
		)
	schedule = {field: entry.get(name) for name, field in SCHEDULE_KEYS.items()}
	schedule.update(_timing(entry, at))
	schedule["time_zone"] = _zone(entry.get("time_zone"), at)
	_check_spec(key, schedule, at)
	return Declared(app, key, task, schedule)


def zone_after(row_zone: str | None, row_declared_zone: str | None, hook_zone: str) -> str:
	"""The time_zone a synced row gets: the hook's, unless an admin changed the row's away from the hook's last one."""
	if (row_zone or "") != (row_declared_zone or ""):
		return row_zone or ""
	return hook_zone


# An entry's key -> where it is in the hook (`where`), for the messages of the helpers below.
At = Callable[[str], str]


def _check_function(app: str, path: Any, at: At) -> None:
	"""The function must be a dotted path into the declaring app itself: an app schedules its own code only."""
	if not path:
		raise DeclaredScheduleError(
			at("function"),
			path,
			_("is required: the dotted path of a function of {app} declared runnable, e.g. {app}.tasks.nightly"),
			app=app,
		)
	first = path.split(".")[0]
	try:
		target = declared.target(path, [first])
	except declared.NotRunnable as exc:
		raise DeclaredScheduleError(at("function"), path, _("{error}"), error=exc) from None
	if target.path != path:
		raise DeclaredScheduleError(
			at("function"),
			path,
			_("{path!r} has spaces around it; write {stripped!r}"),
			path=path,
			stripped=target.path,
		)
	if target.app != app:
		raise DeclaredScheduleError(
			at("function"),
			path,
			_(
				"{path!r} is not a function of app {app}: an app's {hook} names only its own functions, paths "
				"starting {app}."
			),
			path=path,
			app=app,
			hook=HOOK,
		)


def _arguments(value: Any, at: At) -> str | None:
	"""The keyword arguments dict as the Task's JSON text."""
	if value is None:
		return None
	if not isinstance(value, dict):
		raise DeclaredScheduleError(
			at("arguments"), value, _("{value!r} is not a dict of keyword arguments"), value=value
		)
	try:
		return json.dumps(value, sort_keys=True)
	except (TypeError, ValueError) as exc:
		raise DeclaredScheduleError(
			at("arguments"),
			value,
			_("cannot be written as JSON ({error}); use strings, numbers, booleans, lists and dicts"),
			error=exc,
		) from None


def _timing(entry: dict, at: At) -> dict[str, Any]:
	"""run_frequency and cron_string from exactly one of `cron`, `frequency` or `every`."""
	given = [name for name in ("cron", "frequency", "every") if entry.get(name) is not None]
	if len(given) != 1:
		raise DeclaredScheduleError(
			at(given[1] if given else "cron"),
			entry.get(given[1]) if given else None,
			_(
				'give exactly one timing: cron (e.g. "*/5 * * * *"), frequency (Hourly, Daily, Weekly, Monthly, '
				"Yearly, with minute, hour, day_of_week, day_of_month, month) or every (with every_unit)"
			),
		)
	misplaced = [name for name in HELPER_KEYS if entry.get(name) is not None and given != ["frequency"]]
	misplaced += ["every_unit"] if entry.get("every_unit") is not None and given != ["every"] else []
	if misplaced:
		raise DeclaredScheduleError(
			at(misplaced[0]),
			entry[misplaced[0]],
			_("applies only with {timing}; remove it or use that timing"),
			timing="every" if misplaced[0] == "every_unit" else "frequency",
		)
	if given == ["cron"]:
		return {"run_frequency": "Cron Style"}
	if given == ["every"]:
		return {"run_frequency": "Interval"}
	if entry["frequency"] not in HELPERS:
		raise DeclaredScheduleError(
			at("frequency"),
			entry["frequency"],
			_("{value!r} is not one of {choices}; for other timings use cron or every"),
			value=entry["frequency"],
			choices=", ".join(HELPERS),
		)
	# What the Schedule's validate writes for a helper frequency, so an unchanged hook finds the row unchanged.
	try:
		return {"cron_string": frequency_to_cron(entry["frequency"], *(entry.get(name) for name in HELPER_KEYS))}
	except ScheduleError as exc:
		raise DeclaredScheduleError(at(exc.field), exc.value, _("{error}"), error=exc) from None


def _zone(value: str | None, at: At) -> str | None:
	"""None (the row's empty time_zone) for the site zone, else the IANA name as given."""
	if value is None or value.strip().lower() == SITE_ZONE:
		return None
	if not value.strip():
		raise DeclaredScheduleError(
			at("time_zone"),
			value,
			_("is empty; give an IANA zone such as Europe/Paris, or {site_zone!r} (the site's System Settings zone)"),
			site_zone=SITE_ZONE,
		)
	return value.strip()


def _check_spec(key: str, schedule: dict, at: At) -> None:
	"""The timing and policies read as the scheduler will read them (btu.shared.schedule)."""
	row = {**schedule, "name": key, "creation": datetime(2026, 1, 1, tzinfo=timezone.utc)}
	try:
		ScheduleSpec.from_row(row, system_time_zone="UTC")
	except ScheduleError as exc:
		hook_key = next((name for name, field in SCHEDULE_KEYS.items() if field == exc.field), exc.field)
		raise DeclaredScheduleError(at(hook_key), exc.value, _("{error}"), error=exc) from None
