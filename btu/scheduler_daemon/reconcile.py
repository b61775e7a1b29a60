"""Bringing the Redis state in line with the sites' databases.

The databases are the source of truth. A reconcile reads, per site, a cheap
list of (schedule, modified, task modified) and compiles only the rows that
changed since it last looked; a full one also drops schedules, sites and
rows that are gone. It runs at start, every `full_refresh_interval_secs`, and
at once for the schedule an RPC command names. When Redis lost its data (the
state's generation changed) everything is compiled again, and a schedule with
Task Logs resumes after its newest logged slot, so the catch-up policy decides
what the outage cost.
"""

from __future__ import annotations

import json
import logging
import threading
import time
from datetime import datetime, timezone
from pathlib import Path

from btu.shared import protocol
from btu.shared.instants import from_ms, slot_text, to_ms
from btu.shared.declared import NotRunnable
from btu.shared.schedule import ScheduleError, ScheduleSpec
from btu.shared.schedule.zones import FRAPPE_DEFAULT_ZONE
from btu.shared.schedule.zones import clock_for, parse_zone, wall_seconds
from btu.scheduler_daemon.bench import Bench, BenchError, Site, site_name_problem
from btu.scheduler_daemon.database import DatabaseError, SiteDatabase
from btu.scheduler_daemon.jobs import JobTemplate
from btu.scheduler_daemon.log import log_event
from btu.scheduler_daemon.state import State, Upsert

logger = logging.getLogger("btu.scheduler.reconcile")
APPLY_CHUNK = 1000
# Every this many full reconciles, one also audits the state (State.audit): a wrong value that no
# fire reads (a due entry at the wrong time, a schedule gone from the due set) is mended within
# this many full_refresh_interval_secs (5 minutes by default).
AUDIT_EVERY = 5


class RowError(Exception):
	"""A schedule row that cannot be scheduled; the message names the field and the fix."""


def compile_row(row: dict, bench: Bench, executor: str, system_time_zone: str | None) -> tuple[ScheduleSpec, JobTemplate]:
	"""A schedule row (joined with its task) as a spec and a job template."""
	if not str(row["name"]).isprintable():
		# Tabs and newlines separate the fields of the scheduler's own Redis entries.
		raise RowError(f"name {row['name']!r} holds control characters (tab, newline, ...); rename the schedule")
	if not row.get("task_name"):
		raise RowError(f"task {row.get('task')!r}: no BTU Task has that name; pick an existing task")
	spec = ScheduleSpec.from_row(row, system_time_zone=system_time_zone)
	queue_type = (row.get("queue_name") or row.get("task_queue_name") or "default").strip()
	timeouts = bench.queue_timeouts
	if queue_type not in timeouts:
		owner = "" if (row.get("queue_name") or "").strip() else f"task {row['task']}: "
		raise RowError(
			f"{owner}queue_name {queue_type!r}: not a queue of this bench; use one of {', '.join(timeouts)} "
			"(custom queues come from the workers key of common_site_config.json)"
		)
	arguments = parse_json_object("arguments", row.get("task_arguments"), f"task {row['task']}")
	overrides = parse_json_object("argument_overrides", row.get("argument_overrides"), f"schedule {row['name']}")
	template = JobTemplate(
		executor=executor,
		queue=bench.queue_name(queue_type),
		timeout=int(row.get("task_max_task_duration") or 0) or timeouts[queue_type],
		task=row["task"],
		description=row.get("task_desc_short") or row["task"],
		function=(row.get("task_function_string") or "") if executor == "rq" else "",
		kwargs={**arguments, **overrides} if executor == "rq" else {},
	)
	if executor == "rq" and not template.function:
		raise RowError(f"task {row['task']}: function_string is empty; give the dotted path of a function")
	if executor == "rq":
		# Its jobs call the function itself, with no task runner to refuse it.
		try:
			bench.app_files.check(template.function)
		except NotRunnable as exc:
			raise RowError(f"task {row['task']}: {exc}") from None
	return spec, template


def parse_json_object(field: str, text, owner: str) -> dict:
	if text is None or not str(text).strip():
		return {}
	try:
		value = json.loads(text)
	except ValueError as exc:
		raise RowError(
			f"{owner}: {field} is not valid JSON (line {getattr(exc, 'lineno', '?')}, column {getattr(exc, 'colno', '?')}: "
			f"{getattr(exc, 'msg', exc)}); write a JSON object such as {{\"key\": \"value\"}}"
		) from exc
	if not isinstance(value, dict):
		raise RowError(f"{owner}: {field} must be a JSON object, not {type(value).__name__}; wrap it as {{\"name\": ...}}")
	return value


class Reconciler:
	def __init__(self, bench_path: str | Path, state: State, executor: str, clock, wake, audit_secs: float = 300.0):
		self.bench_path = bench_path
		self.state = state
		self.executor = executor
		self.clock = clock  # callable returning Redis's now as an aware datetime
		self.wake = wake  # callable telling every process the state changed
		self.bench = Bench.load(bench_path)
		self.databases: dict[str, SiteDatabase] = {}
		self.seen: dict[str, dict[str, tuple[str, str]]] = {}  # site -> schedule -> (row version, site context) compiled
		self.summaries: dict[str, tuple] = {}  # site -> (table checksum, site context) at its last full reconcile
		self.generation: str | None = None
		self.unreachable: set[str] = set()  # sites whose database does not answer
		self.unreadable: dict[str, str] = {}  # sites whose site_config.json cannot be read -> why
		self.served: set[str] = set()
		self.paused_sites: dict[str, str] = {}
		self.lock = threading.RLock()
		self.audit_secs = audit_secs
		self.next_audit = time.monotonic() + audit_secs

	def database(self, site: Site) -> SiteDatabase:
		db = self.databases.get(site.name)
		if db is None or db.site.config != site.config:
			if db is not None:
				db.close()
			db = self.databases[site.name] = SiteDatabase(site)
		return db

	def check_generation(self) -> None:
		generation = self.state.generation()
		if generation != self.generation:
			if self.generation is not None:
				log_event(logger, logging.WARNING, "state_rebuild", reason="Redis lost the scheduler state; rebuilding from the databases")
			self.generation = generation
			self.seen.clear()
			self.summaries.clear()

	def forget_resynced(self) -> None:
		"""Schedules whose state was quarantined are compiled again from their rows ("*": all of them,
		"<site>|*": all of a site's)."""
		for member in self.state.take_resync():
			if member == protocol.RESYNC_ALL:
				self.seen.clear()
				self.summaries.clear()
				continue
			site, name = protocol.parse_due_member(member)
			if name == protocol.RESYNC_ALL:
				self.seen.pop(site, None)
			else:
				self.seen.get(site, {}).pop(name, None)
			self.summaries.pop(site, None)

	# -- full reconcile ---------------------------------------------------------

	def full(self) -> None:
		with self.lock:
			try:
				self.bench = Bench.load(self.bench_path)
			except BenchError as exc:
				log_event(logger, logging.ERROR, "bench_unreadable", error=str(exc))
				return
			self.check_generation()
			if time.monotonic() >= self.next_audit:
				self.audit()  # before the sites, so that what it moved aside is rebuilt by this reconcile
			self.forget_resynced()
			served = set()
			for name in self.bench.site_names():
				try:
					site = self.bench.site(name)
				except BenchError as exc:
					# Shown in the status like an unreachable database. An unreadable config keeps the site firing
					# from the Redis state; a refused name never fires, and its state is dropped below.
					refused = site_name_problem(name) is not None
					if self.unreadable.get(name) != str(exc):
						log_event(
							logger, logging.ERROR, "site_refused" if refused else "site_unreadable", site=name, error=str(exc),
							effect="its schedules never fire" if refused else "firing continues from the Redis state",
						)
					self.unreadable[name] = str(exc)
					continue
				if self.unreadable.pop(name, None):
					log_event(logger, logging.INFO, "site_readable", site=name)
				if self.reconcile_site(site):
					served.add(name)
			for gone in set(self.unreadable) - set(self.bench.site_names()):
				del self.unreadable[gone]
			kept = {name for name in self.unreadable if site_name_problem(name) is None}
			for gone in self.state.sites() - served - self.unreachable - kept:
				log_event(logger, logging.INFO, "site_dropped", site=gone, reason="no longer a BTU site of this bench")
				self.state.purge_site(gone)
				self.seen.pop(gone, None)
				self.summaries.pop(gone, None)
			self.served = served
			self.wake()

	def audit(self) -> None:
		"""Mend the state of every firing site's schedules (State.audit), logging what was wrong."""
		self.next_audit = time.monotonic() + self.audit_secs
		moved_keys = self.state.check_types(self.state.sites())
		firing = sorted(self.served - set(self.paused_sites))
		members = [protocol.due_member(site, name) for site in firing for name in sorted(self.seen.get(site, {}))]
		mended, moved = self.state.audit(members)
		if mended or moved or moved_keys:
			log_event(
				logger, logging.WARNING, "state_mended", due_entries=mended, states_moved_aside=moved, keys_moved_aside=",".join(moved_keys),
				effect="due entries put right; what was moved aside is rebuilt from the database rows",
			)

	def reconcile_site(self, site: Site, names: list[str] | None = None) -> bool:
		"""Reconcile one site (or some schedules of it); True if the site is a BTU site."""
		db = self.database(site)
		try:
			if not db.has_btu_tables():
				return False
			system_tz = db.system_time_zone()
			held = site.paused or (None if db.btu_enabled() else "BTU Configuration.enabled = 0")
			context = f"{system_tz}|{bool(held)}|{self.executor}|{json.dumps(self.bench.queue_timeouts, sort_keys=True)}|{self.bench.app_files.fingerprint}"
			if names is None:
				# Most reconciles find nothing changed: one checksum query instead of every row's version.
				summary = (self.table_summary(db), context)
				# Invalid rows are compiled again each time: a fix may not touch `modified` (a DBA's UPDATE).
				retry = self.state.invalid_names(site.name)
				unchanged = site.name in self.seen and self.summaries.get(site.name) == summary and not retry
				self.summaries[site.name] = summary
			versions = {} if names is None and unchanged else self.row_versions(db, names)
		except DatabaseError as exc:
			if site.name not in self.unreachable:
				log_event(logger, logging.ERROR, "database_unreachable", site=site.name, error=str(exc), effect="firing continues from the Redis state")
			self.unreachable.add(site.name)
			return site.name in self.state.sites()
		if site.name in self.unreachable:
			self.unreachable.discard(site.name)
			log_event(logger, logging.INFO, "database_restored", site=site.name)
		was_held = self.paused_sites.pop(site.name, None)
		if held:
			self.paused_sites[site.name] = held
			if held != was_held:
				log_event(logger, logging.WARNING, "site_held", site=site.name, reason=held, effect="its schedules do not fire; their cursors are kept")
			if self.state.names(site.name):
				self.state.hold_site(site.name)
		elif was_held:
			log_event(logger, logging.INFO, "site_resumed", site=site.name, reason=f"no longer held ({was_held})")
		if names is None and unchanged:
			return True
		seen = self.seen.setdefault(site.name, {})
		enabled = {name: (version, context) for name, (version, on) in versions.items() if on}
		in_state = self.state.names(site.name) if names is None else set(names)
		for name in (in_state | set(seen)) - set(enabled):
			if names is None or name in names:
				self.remove(site.name, name, reason="disabled or deleted")
		if names is None:
			changed = [name for name, version in enabled.items() if seen.get(name) != version or name in retry]
		else:
			# Only a row changed since this process compiled it, missing from the state (another process
			# took it out) or invalid: a flood naming unchanged schedules costs these reads, no compile.
			present = self.present(site.name, [name for name in names if name in enabled])
			retry = self.state.invalid_names(site.name)
			changed = [name for name, there in present.items() if not there or seen.get(name) != enabled[name] or name in retry]
		if changed:
			self.apply(site, db, changed, system_tz, active=not held, versions=enabled)
		return True

	def present(self, site: str, names: list[str]) -> dict[str, bool]:
		"""Whether each schedule is in the state, in one round trip."""
		key = protocol.site_schedules_key(site)
		with self.state.redis.pipeline(transaction=False) as pipe:
			for name in names:
				pipe.sismember(key, name)
			return dict(zip(names, map(bool, pipe.execute())))

	def table_summary(self, db: SiteDatabase) -> tuple:
		"""A checksum over what `row_versions` reads, computed by the database."""
		q = db._quote
		fields = f"s.{q('name')}, s.{q('modified')}, s.{q('enabled')}, s.{q('paused')}, t.{q('modified')}"
		checksum = f"SUM(hashtext(CONCAT_WS('|', {fields})))" if db.postgres else f"SUM(CRC32(CONCAT_WS('|', {fields})))"
		row = db.query(
			f"SELECT COUNT(*) AS n, {checksum} AS checksum "
			f"FROM {q('tabBTU Task Schedule')} s LEFT JOIN {q('tabBTU Task')} t ON t.{q('name')} = s.{q('task')}"
		)[0]
		return (int(row["n"]), str(row["checksum"]))

	def row_versions(self, db: SiteDatabase, names: list[str] | None) -> dict[str, tuple[str, bool]]:
		q = db._quote
		sql = (
			f"SELECT s.{q('name')} AS name, s.{q('modified')} AS modified, s.{q('enabled')} AS enabled, "
			f"s.{q('paused')} AS paused, t.{q('modified')} AS task_modified "
			f"FROM {q('tabBTU Task Schedule')} s LEFT JOIN {q('tabBTU Task')} t ON t.{q('name')} = s.{q('task')}"
		)
		params: tuple = ()
		if names is not None:
			sql += f" WHERE s.{q('name')} IN ({', '.join(['%s'] * len(names))})"
			params = tuple(names)
		rows = db.query(sql, params) if names != [] else []
		return {
			row["name"]: (f"{row['modified']}|{row['task_modified']}|{row['paused']}", bool(int(row["enabled"] or 0)))
			for row in rows
		}

	def apply(self, site: Site, db: SiteDatabase, names: list[str], system_tz: str | None, *, active: bool, versions) -> None:
		# In chunks, so a site with 100k schedules costs the memory of one chunk, not of every row at once.
		in_state = self.state.names(site.name)
		for start in range(0, len(names), APPLY_CHUNK):
			rows = db.schedules(names[start : start + APPLY_CHUNK])
			logged = db.last_logged_slots([row["name"] for row in rows if row["name"] not in in_state])
			self.apply_rows(site, rows, logged, system_tz, active=active, versions=versions)
		self.wake()

	def apply_rows(self, site: Site, rows: list[dict], logged: dict, system_tz: str | None, *, active: bool, versions) -> None:
		now = self.clock()
		invalid: dict[str, str] = {}
		upserts: list[Upsert] = []
		specs: dict[str, ScheduleSpec] = {}
		seen = self.seen.setdefault(site.name, {})
		for row in rows:
			name = row["name"]
			seen[name] = versions[name]
			try:
				spec, template = compile_row(row, self.bench, self.executor, system_tz)
				new_cursor = spec.next_slot(resume_after(logged.get(name), row.get("modified"), system_tz, now))
				now_cursor = spec.next_slot(now)
			except Exception as exc:  # one row must never stop the rest of its site, nor the sites after it
				invalid[name] = str(exc) if isinstance(exc, (ScheduleError, RowError)) else f"cannot be scheduled: {type(exc).__name__}: {exc}"
				log_event(logger, logging.ERROR, "invalid_schedule", site=site.name, schedule=name, error=invalid[name])
				self.state.remove(site.name, name)
				continue
			specs[name] = spec
			upserts.append(
				Upsert(
					name=name,
					fingerprint=spec.fingerprint,
					spec=spec.to_dict(),
					job=template.to_dict(),
					paused=bool(int(row.get("paused") or 0)),
					active=active,
					new_cursor=cursor_text(new_cursor),
					new_fire_at=fire_at_text(spec, new_cursor),
					now_cursor=cursor_text(now_cursor),
					now_fire_at=fire_at_text(spec, now_cursor),
					modified=str(row.get("modified")),
				)
			)
		results = self.state.upsert_many(site.name, upserts)
		if logger.isEnabledFor(logging.INFO):
			for entry, result in zip(upserts, results):
				if result != "same":
					cursor = entry.new_cursor if result in ("new", "rebuilt") else entry.now_cursor
					log_event(
						logger, logging.INFO, "schedule_" + result, site=site.name, schedule=entry.name,
						slot=slot_text(from_ms(cursor)) if cursor else None, description=specs[entry.name].describe(),
					)
		if invalid:
			self.state.set_invalid(site.name, invalid, replace=False)

	def remove(self, site: str, name: str, reason: str) -> None:
		if self.state.remove(site, name):
			log_event(logger, logging.INFO, "schedule_removed", site=site, schedule=name, reason=reason)
		self.state.clear_invalid(site, name)
		self.seen.get(site, {}).pop(name, None)
		self.summaries.pop(site, None)  # the state no longer mirrors the table: diff it next time

	# -- some schedules, for RPC commands ------------------------------------------

	def sync_schedules(self, site_name: str, names: list[str]) -> None:
		"""Bring these schedules in line with their rows: kept or updated if enabled, removed if disabled or gone."""
		with self.lock:
			self.check_generation()
			site = self.bench.site(site_name)
			self.reconcile_site(site, names)
			self.wake()


def cursor_text(slot: datetime | None) -> str:
	return str(to_ms(slot)) if slot is not None else ""


def fire_at_text(spec: ScheduleSpec, slot: datetime | None) -> str:
	return str(to_ms(spec.fire_time(slot))) if slot is not None else "0"


def resume_after(logged_slot: str | None, modified, system_tz: str | None, now: datetime) -> datetime:
	"""Where a schedule new to the state starts: after its newest logged slot, or its row's last change when
	that is later (it was disabled or paused until then: no catch-up for time it was off), else now."""
	logged = parse_logged_slot(logged_slot)
	if logged is None:
		return now
	changed = row_moment(modified, system_tz)
	return min(max(logged, changed), now) if changed else logged


def row_moment(value, system_tz: str | None) -> datetime | None:
	"""A Datetime column (naive in the site's system zone, as Frappe stores it) as an aware UTC instant."""
	if isinstance(value, str):
		try:
			value = datetime.fromisoformat(value.strip())
		except ValueError:
			return None
	if not isinstance(value, datetime):
		return None
	if value.tzinfo is not None:
		return value.astimezone(timezone.utc)
	try:
		clock = clock_for(parse_zone((system_tz or "").strip() or FRAPPE_DEFAULT_ZONE))
	except ScheduleError:
		return None
	return datetime.fromtimestamp(clock.instant(wall_seconds(value)), timezone.utc)


def parse_logged_slot(text: str | None) -> datetime | None:
	if not text:
		return None
	try:
		return datetime.fromisoformat(text.replace("Z", "+00:00")).astimezone(timezone.utc)
	except ValueError:
		return None
