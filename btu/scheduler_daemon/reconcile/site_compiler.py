"""A site's rows compiled into the Redis state, and what this process compiled of each site: the version of each row it
compiled and the summary of each site's table when the state last mirrored it, so that a reconcile compiles only what
changed. When Redis lost the state (its generation changed), or a resync of everything was asked, both are emptied and
everything is compiled again; a schedule with Task Logs then resumes after its newest logged slot.

The rows come from `site_rows.py`, their compile from `row_compile.py`; the writes are `state.py`'s. Callers hold the
reconcile lock (`site_sync.py`), but for `cold` and `rows_ahead`, which only read.
"""

from __future__ import annotations

import logging

from btu.scheduler_daemon.log import log_event
from btu.scheduler_daemon.reads import sources
from btu.scheduler_daemon.reads.bench import Bench, Site
from btu.scheduler_daemon.reads.site_read import SiteRead
from btu.scheduler_daemon.reconcile.row_compile import compile_row, compiled, row_problem
from btu.scheduler_daemon.reconcile.site_rows import APPLY_CHUNK, SiteRows, read_chunk
from btu.scheduler_daemon.store.state import CompiledSchedule, State
from btu.shared.instants import from_ms, slot_text
from btu.shared.keys import RESYNC_ALL, parse_due_member
from btu.shared.run_kind import RESERVED_STARTS
from btu.shared.run_row import RunRow
from btu.shared.schedule import ScheduleSpec

logger = logging.getLogger("btu.scheduler.reconcile")


class SiteCompiler:
	"""Compiles a site's rows into the state and remembers what it compiled. `bench` is the bench as last loaded."""

	def __init__(self, bench: Bench, state: State, executor: str, clock, wake):
		self.bench = bench
		self.state = state
		self.executor = executor
		self.clock = clock  # callable returning Redis's now as an aware datetime
		self.wake = wake  # callable telling every process the state changed
		# site -> schedule -> (row version, site context) compiled
		self.seen: dict[str, dict[str, tuple[str, str]]] = {}
		self.summaries: dict[str, tuple] = {}  # site -> (table summary, site context) at its last full reconcile
		self.generation: str | None = None
		self.resets = 0  # `seen` emptied (Redis lost the state, a resync of everything)
		self.refused_names: set[tuple[str, str]] = set()  # (site, schedule) named like another kind's run, logged once

	def check_generation(self) -> None:
		"""After Redis lost the state (its generation changed), compile every schedule again."""
		generation = self.state.generation()
		if generation != self.generation:
			if self.generation is not None:
				log_event(
					logger,
					logging.WARNING,
					"state_rebuild",
					reason="Redis lost the scheduler state; rebuilding from the databases",
				)
			self.generation = generation
			self.forget_everything()

	def forget_resynced(self) -> None:
		"""Schedules whose state was quarantined are compiled again from their rows ("*": all of them,
		"<site>|*": all of a site's)."""
		for member in self.state.take_resync():
			if member == RESYNC_ALL:
				self.forget_everything()
				continue
			site, name = parse_due_member(member)
			if name == RESYNC_ALL:
				self.seen.pop(site, None)
			else:
				self.seen.get(site, {}).pop(name, None)
			self.summaries.pop(site, None)

	def forget_everything(self) -> None:
		"""Compile every site again: a reset (`resets`), which a site's reconcile under way notices."""
		self.seen.clear()
		self.summaries.clear()
		self.resets += 1

	def forget_site(self, site: str) -> None:
		"""The site left the state: should it come back, it is compiled whole."""
		self.seen.pop(site, None)
		self.summaries.pop(site, None)

	def compiled(self, site: str) -> dict[str, tuple[str, str]]:
		"""Schedule -> (row version, site context) as this process compiled the site, which is known from now on (a
		site read ahead is compiled only while it is not)."""
		return self.seen.setdefault(site, {})

	def known(self, site: str) -> bool:
		"""Whether this process compiled the site since it last forgot it."""
		return site in self.seen

	def names(self, site: str) -> list[str]:
		"""The site's schedules this process compiled, sorted."""
		return sorted(self.seen.get(site, {}))

	def unchanged(self, site: str, summary: tuple) -> bool:
		"""Whether the state mirrors the site's table as `summary` (table summary, site context) reads it."""
		return site in self.seen and self.summaries.get(site) == summary

	def mirrored(self, site: str, summary: tuple, resets: int) -> None:
		"""The state mirrors the site's table as `summary` read it, unless a reset came since `resets`."""
		if self.resets == resets:
			self.summaries[site] = summary

	def cold(self, site: Site, read) -> bool:
		"""Whether the site is to be compiled whole (this process never compiled it), small enough to read ahead."""
		return (
			isinstance(read, SiteRead)
			and site.name not in self.seen
			and read.summary is not None
			and read.summary[0] <= APPLY_CHUNK
		)

	def rows_ahead(self, read: SiteRead) -> SiteRows:
		"""Every enabled row of the site, as `apply` would read them a chunk at a time."""
		versions = self.row_versions(read, None)
		rows, logged = read_chunk(read, list(versions), self.state.names(read.db.site.name), self.clock())
		return SiteRows(versions, rows, logged)

	def row_versions(self, read: SiteRead, names: list[str] | None) -> dict[str, str]:
		"""Enabled run (of those named by their key texts; all when `names` is None) -> its version, which changes with
		its row or task: schedules, pending run requests and the Scheduled Job Types BTU fires (`sources.versions`)."""
		versions, refused = sources.versions(read, names)
		log_refused(read.db.site.name, refused, self.refused_names)
		return versions

	def apply(
		self, site: Site, read: SiteRead, names: list[str], versions: dict[str, str], in_state: set[str] | None = None
	) -> None:
		"""Compile these schedules from their rows into the state; `versions` are those `row_versions` read.
		`in_state`: which of `names` the state holds, when the caller knows (else the site's whole listing is read)."""
		if not names:
			return
		# In chunks (APPLY_CHUNK): a site with 100k schedules costs the memory of one chunk, not of all its rows.
		if in_state is None:
			in_state = self.state.names(site.name)
		for start in range(0, len(names), APPLY_CHUNK):
			chunk = names[start : start + APPLY_CHUNK]
			self.apply_rows(site, read, *read_chunk(read, chunk, in_state, self.clock()), versions)
		self.wake()

	def apply_rows(
		self, site: Site, read: SiteRead, rows: list[RunRow], logged: dict[str, str], versions: dict[str, str]
	) -> None:
		"""Compile these rows into the state; a row that cannot be scheduled leaves it and is listed as invalid.
		`logged`: schedule -> its newest logged slot, for those new to the state."""
		now = self.clock()
		invalid: dict[str, str] = {}
		upserts: list[CompiledSchedule] = []
		specs: dict[str, ScheduleSpec] = {}
		seen = self.seen.setdefault(site.name, {})
		for row in rows:
			name = row.name
			seen[name] = (versions[name], read.context)
			try:
				spec, template = compile_row(row, self.bench, self.executor, read.system_tz, site)
				cursor_if_new, cursor_if_changed = row.first_cursors(spec, logged.get(name), read.system_tz, now)
			except Exception as exc:  # one row must never stop the rest of its site, nor the sites after it
				invalid[name] = row_problem(exc)
				log_event(logger, logging.ERROR, "invalid_schedule", site=site.name, schedule=name, error=invalid[name])
				self.state.remove(site.name, name)
				continue
			specs[name] = spec
			upserts.append(compiled(row, spec, template, cursor_if_new, cursor_if_changed, active=not read.held))
		log_applied(site.name, upserts, self.state.upsert_many(site.name, upserts), specs)
		if invalid:
			self.state.set_invalid(site.name, invalid, replace=False)

	def remove(self, site: str, name: str, reason: str) -> None:
		"""Take one schedule out of the state (logged when it was there) and forget that it was compiled."""
		if self.state.remove(site, name):
			log_event(logger, logging.INFO, "schedule_removed", site=site, schedule=name, reason=reason)
		self.state.clear_invalid(site, name)
		self.seen.get(site, {}).pop(name, None)
		self.summaries.pop(site, None)  # the state no longer mirrors the table: diff it next time


def log_refused(site: str, names: list[str], logged: set[tuple[str, str]]) -> None:
	"""Schedules left out for a name that reads as another kind's run (the Desk refuses such a name on save; SQL may
	write one), logged once per process: `logged` remembers them."""
	for name in names:
		if (site, name) not in logged:
			logged.add((site, name))
			log_event(
				logger,
				logging.ERROR,
				"invalid_schedule",
				site=site,
				schedule=name,
				error=(
					f"a schedule's name may not start with {' or '.join(map(repr, RESERVED_STARTS))}, "
					"which name run requests' and Scheduled Job Types' states; rename it"
				),
			)


def log_applied(site: str, upserts: list[CompiledSchedule], results: list[str], specs: dict[str, ScheduleSpec]) -> None:
	"""One line per schedule that `State.upsert_many` added or changed (`results`, in the order of `upserts`)."""
	if not logger.isEnabledFor(logging.INFO):
		return
	for entry, result in zip(upserts, results):
		if result != "same":
			cursor = entry.cursor_if_new if result in ("new", "rebuilt") else entry.cursor_if_changed
			log_event(
				logger,
				logging.INFO,
				"schedule_" + result,
				site=site,
				schedule=entry.name,
				slot=slot_text(from_ms(cursor)) if cursor else None,
				description=specs[entry.name].describe(),
			)
