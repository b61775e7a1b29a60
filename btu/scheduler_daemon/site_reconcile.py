"""A site brought in line with its table by a full reconcile, in holds of the reconciler's lock short enough that an
RPC's edit, of this site or another, waits for one of them at most: the versions of a site's rows are read without the
lock, and a site with more than HOLD_CHUNK rows to bring in line is brought in line a chunk a hold, the edits waiting
let in first between two holds (`ReconcileLock`).

What may not be lost or doubled: an RPC comes after its edit's commit and reads its rows under the lock. The runs an
RPC brought in line after a site's reconcile began (`Reconciler.touched`) are left as the RPC left them, since this
reconcile's versions and rows may be older than the RPC's read; any other row is written as read here, and an edit
committed after that read brings its own RPC, which brings the row in line after this write (it waits for the hold).
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from btu.scheduler_daemon.bench import Site
from btu.scheduler_daemon.database import DatabaseError
from btu.scheduler_daemon.site_read import SiteRead
from btu.scheduler_daemon.site_rows import APPLY_CHUNK, HOLD_CHUNK, SiteRows, read_chunk

if TYPE_CHECKING:
	from btu.scheduler_daemon.reconcile import Reconciler


class ReconcileLock:
	"""The reconciler's lock (reentrant), taken with `with`; an RPC's edit takes it with `edit()`. A lock does not queue
	its waiters: a full reconcile that released it between two chunks of a site would take it again before a waiting
	edit woke, and the edit would wait for the whole site after all. So between chunks the reconcile calls
	`let_edits_in`, which returns once every edit that was waiting has taken the lock (never while holding it)."""

	# The longest `let_edits_in` waits, should an edit never take the lock (it cannot: it is free).
	HANDOFF_SECS = 10.0

	def __init__(self):
		self.lock = threading.RLock()
		self.waiting = 0  # edits waiting for the lock
		self.taken = threading.Condition(threading.Lock())

	def __enter__(self) -> ReconcileLock:
		self.lock.acquire()
		return self

	def __exit__(self, *exc) -> None:
		self.lock.release()

	@contextmanager
	def edit(self) -> Iterator[None]:
		with self.taken:
			self.waiting += 1
		try:
			self.lock.acquire()
		finally:
			with self.taken:
				self.waiting -= 1
				self.taken.notify_all()
		try:
			yield
		finally:
			self.lock.release()

	def let_edits_in(self) -> None:
		with self.taken:
			self.taken.wait_for(lambda: not self.waiting, self.HANDOFF_SECS)


@dataclass
class Diff:
	"""One site's reconcile between its holds of the reconciler lock (`Reconciler.reconcile_site`): what the first hold
	found, the versions read without the lock, and, for a site with more than HOLD_CHUNK rows to bring in line, what is
	left to do a chunk a hold (`Reconciler.reconcile_rest`)."""

	site: Site
	read: SiteRead
	summary: tuple  # the site's (table summary, context), kept once the state mirrors it
	retry: set[str]  # listed as invalid: compiled again
	ahead: SiteRows | None  # its rows read ahead of the lock (a cold site)
	enabled: dict[str, str] | None  # run -> its version (`row_versions`), read after the first hold
	resets: int  # `Reconciler.resets` at the first hold: a reset since (Redis lost the state) leaves the summary unkept
	# Runs an RPC brought in line since the first hold (`Reconciler.touched`): it read their rows later, so this
	# reconcile leaves them as the RPC left them; a later edit brings its own RPC, after the hold that read the row.
	touched: set[str]
	removed: list[str] = field(default_factory=list)  # not enabled: taken out
	changed: list[str] = field(default_factory=list)  # changed since this process compiled them, new, or invalid
	in_state: set[str] = field(
		default_factory=set
	)  # the site's schedules in the state: the others' logged slots are read


class SiteReconcile:
	"""`Reconciler`'s reconcile of one site (a mixin: the reconciler's state is its own)."""

	def reconcile_site(
		self: Reconciler,
		site: Site,
		read: SiteRead | None | DatabaseError,
		has_invalid: bool,
		ahead: SiteRows | None = None,
	) -> bool:
		"""Bring every schedule of one site in line with its table, from what `read_sites` read of it: compiled when its
		row changed, removed when disabled or gone. True if it is a BTU site (or has state while its database does
		not answer). `has_invalid`: the site has invalid rows listed, which are compiled again each time (a fix may not
		touch `modified`: a DBA's UPDATE). `ahead`: its rows read before the lock, used if nothing compiled it since.

		Under the lock, but for the read of its rows' versions (10,000 rows take a few tenths of a second), and released
		between chunks of HOLD_CHUNK rows when there are more (`reconcile_rest`): an RPC's edit, and a stop, wait for
		one chunk at most. Waiting edits go first (`ReconcileLock.let_edits_in`)."""
		self.lock.let_edits_in()
		with self.lock:
			try:
				diff = self.begin_site(site, read, has_invalid, ahead)
			except DatabaseError as exc:
				return self.database_down(site, exc)
		if isinstance(diff, bool):
			return diff
		try:
			if diff.enabled is None:
				diff.enabled = self.row_versions(diff.read, None)
			self.lock.let_edits_in()
			with self.lock:
				if self.diff_site(diff):
					return True
			return self.reconcile_rest(diff)
		except DatabaseError as exc:
			with self.lock:
				return self.database_down(site, exc)
		finally:
			with self.lock:
				self.touched.pop(site.name, None)

	def begin_site(
		self: Reconciler, site: Site, read: SiteRead | None | DatabaseError, has_invalid: bool, ahead: SiteRows | None
	) -> bool | Diff:
		"""`reconcile_site`'s first hold: done when nothing changed (most reconciles: a checksum instead of every row's
		version); else the site's `Diff`, and the runs RPCs bring in line from now on are noted (`touched`)."""
		if isinstance(read, DatabaseError):
			raise read
		if read is None:
			return False
		summary = (read.summary, read.context)
		retry = self.state.invalid_names(site.name) if has_invalid else set()
		if site.name in self.seen and self.summaries.get(site.name) == summary and not retry:
			self.site_answered(site, read.held)
			self.frappe_jobs.took(site, read.scheduled_jobs)
			return True
		if site.name in self.seen:
			ahead = None  # an RPC compiled some of it since it was read ahead: read it again here
		touched = self.touched[site.name] = set()
		return Diff(
			site, read, summary, retry, ahead, ahead.versions if ahead is not None else None, self.resets, touched
		)

	def diff_site(self: Reconciler, diff: Diff) -> bool:
		"""`reconcile_site`'s second hold: the versions against what this process compiled; the site brought in line if
		that is at most HOLD_CHUNK rows (or it was read ahead), else False: the rest is left to `reconcile_rest`."""
		site, read, touched = diff.site, diff.read, diff.touched
		self.site_answered(site, read.held)
		seen = self.seen.setdefault(site.name, {})
		in_state = self.state.names(site.name)
		removed = sorted((in_state | set(seen)) - set(diff.enabled) - touched)
		changed = [
			name
			for name, version in diff.enabled.items()
			if name not in touched and (seen.get(name) != (version, read.context) or name in diff.retry)
		]
		if diff.ahead is None and len(removed) + len(changed) > HOLD_CHUNK:
			diff.removed, diff.changed, diff.in_state = removed, changed, in_state
			return False
		for name in removed:
			self.remove(site.name, name, reason="disabled or deleted")
		if diff.ahead is not None:
			self.apply_rows(
				site,
				read,
				[row for row in diff.ahead.rows if row["name"] not in touched],
				diff.ahead.logged,
				diff.enabled,
			)
			self.wake()
		else:
			self.apply(site, read, changed, diff.enabled)
		self.site_done(diff)
		return True

	def reconcile_rest(self: Reconciler, diff: Diff) -> bool:
		"""The rest of a big site's reconcile: its rows read APPLY_CHUNK at a time without the lock, as a read-ahead
		site's are, and written HOLD_CHUNK a hold of it, removals first. Between two holds an RPC may bring any run in
		line, of this site too; the runs it touched are left as it left them (it read their rows after this read). A
		stop leaves the rest to the next cycle."""
		read = diff.read
		work = [(name, False) for name in diff.removed] + [(name, True) for name in diff.changed]
		try:
			for start in range(0, len(work), APPLY_CHUNK):
				part = work[start : start + APPLY_CHUNK]
				wanted = [name for name, compile in part if compile and name not in diff.touched]
				rows, logged = read_chunk(read, wanted, diff.in_state, self.clock()) if wanted else ([], {})
				for hold in range(0, len(part), HOLD_CHUNK):
					if self.stopping.is_set():
						return True  # the summary is not kept: the next cycle diffs the site again
					self.lock.let_edits_in()
					with self.lock:
						self.apply_hold(diff, part[hold : hold + HOLD_CHUNK], rows, logged)
			self.lock.let_edits_in()
			with self.lock:
				self.site_done(diff)
		finally:
			self.wake()
		return True

	def apply_hold(
		self: Reconciler, diff: Diff, chunk: list[tuple[str, bool]], rows: list[dict], logged: dict[str, str]
	) -> None:
		"""One hold of `reconcile_rest`: the chunk's removals, then its rows from the part read before, but for the runs
		an RPC touched meanwhile. After a reset (Redis lost the state) the chunk's rows are read again here, so that a
		schedule no longer in the state resumes after its newest logged slot."""
		site, read = diff.site, diff.read
		chunk = [(name, compile) for name, compile in chunk if name not in diff.touched]
		for name, compile in chunk:
			if not compile:
				self.remove(site.name, name, reason="disabled or deleted")
		names = {name for name, compile in chunk if compile}
		if not names:
			return
		if self.resets != diff.resets:
			rows, logged = read_chunk(read, sorted(names), self.state.names(site.name), self.clock())
		self.apply_rows(site, read, [row for row in rows if row["name"] in names], logged, diff.enabled)

	def site_done(self: Reconciler, diff: Diff) -> None:
		"""The state mirrors the site's table as read: its summary kept, so the next reconcile that reads the same
		checksum reads no row. Not after a reset since its first hold (Redis lost the state, or a resync of everything
		emptied `seen`): the next cycle compiles the site again."""
		if self.resets == diff.resets:
			self.summaries[diff.site.name] = diff.summary
		self.frappe_jobs.took(diff.site, diff.read.scheduled_jobs)
