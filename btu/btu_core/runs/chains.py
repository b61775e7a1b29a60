"""Chained runs: a finished run starts its Task's chained Tasks as BTU Run Requests, named per (Log, next task), within
the chain's depth and run bounds (`btu.shared.run_requests`); a Task's chains are checked for cycles under a lock.
"""

from __future__ import annotations

from datetime import datetime, timedelta

import frappe
from frappe import _
from frappe.utils import cint, flt

from btu.btu_core.instants import to_system_naive, utc_now
from btu.btu_core.runs.run_requests import announce, insert
from btu.btu_core.scheduler_link import announce_after_commit
from btu.btu_core.sealed import store
from btu.shared import protocol
from btu.shared import run_requests as rr
from btu.shared.instants import format_utc_iso, parse_utc_iso
from btu.shared.run_kind import RunKey, RunKind


def start_chained(log, task, request=None) -> tuple[list[str], str | None]:
	"""The Task's chained tasks for this run's outcome, each requested once per (this Log, that Task), as far as the
	chain's bounds allow (`rr.chained_runs_allowed`): the requests, and a note for the Log naming the tasks a bound
	stopped (None when none was). `request` is this run's own: a chained run's carries its chain's root and depth."""
	outcome = "Success" if log.status == "Succeeded" else "Failure"
	rows = [row for row in task.get("chained_tasks") or [] if row.on_outcome in (outcome, "Any") and row.next_task]
	if not rows:
		return [], None
	root, depth = chain_lineage(log, request)
	started = chained_runs_started(root)
	allowed = rr.chained_runs_allowed(depth, started, len(rows))
	names = []
	for row in rows[:allowed]:
		doc, _inserted = insert(
			rr.chain_request_name(log.name, row.next_task),
			task=row.next_task,
			origin=rr.CHAIN,
			attempt=1,
			run_at=utc_now() + timedelta(seconds=max(0, cint(row.delay_secs))),
			parent_log=log.name,
			chain_root=root,
			chain_depth=depth + 1,
			status=rr.PENDING,
			note=_("Chained after {0} ({1}) of {2}.").format(log.name, log.status, task.name),
		)
		names.append(doc.name)
	if allowed == len(rows):
		return names, None
	stopped = ", ".join(row.next_task for row in rows[allowed:])
	if depth >= rr.MAX_CHAIN_DEPTH:
		note = _(
			"Chained tasks {0} not started: this run is {1} links from the chain's first run {2}, the most a chain "
			"may have ({3})."
		).format(stopped, depth, root, rr.MAX_CHAIN_DEPTH)
	else:
		note = _(
			"Chained tasks {0} not started: the chain of the run {1} has started {2} runs, the most one run's chain "
			"may start ({3})."
		).format(stopped, root, started + allowed, rr.MAX_CHAIN_RUNS)
	frappe.logger("btu").warning(
		f"site={frappe.local.site} log={log.name} chain_root={root} chained tasks not started: {stopped}"
	)
	return names, note


def chain_lineage(log, request) -> tuple[str, int]:
	"""(the chain's root run's Log, this run's depth from it): a chained run's (or its retry's) from its request, else
	this run starts a chain of its own at depth 0. Carried in the requests, so the bounds hold whatever the saved links
	say now: a cycle written past the save's check, or links edited while the chain runs."""
	if request is not None and request.get("chain_root"):
		return request.chain_root, cint(request.chain_depth)
	return log.name, 0


def chained_runs_started(root: str) -> int:
	"""How many chained runs the chain of `root` (a Log) has requested. Its root Log is locked first, so chained runs of
	one chain finishing at once count one after the other; the count is a locking read, so it sees what the one before
	committed (a plain read would see this transaction's older snapshot)."""
	frappe.db.sql("select name from `tabBTU Task Log` where name = %s for update", root)
	return len(
		frappe.db.sql(
			f"select name from `tab{rr.DOCTYPE}` where chain_root = %s and origin = %s for update", (root, rr.CHAIN)
		)
	)


def chain_cycle(task_name: str, edges: dict[str, set[str]]) -> list[str] | None:
	"""A path of chained tasks from `task_name` back to itself in `edges` (task -> its next tasks), or None."""
	stack = [(task_name, [task_name])]
	seen = set()
	while stack:
		node, path = stack.pop()
		for child in sorted(edges.get(node, ())):
			if child == task_name:
				return [*path, child]
			if child not in seen:
				seen.add(child)
				stack.append((child, [*path, child]))
	return None


def lock_chains() -> None:
	"""Until this transaction ends, hold the lock every save adding chain links takes before it looks for a cycle.

	A cycle spans Tasks: saves of A -> B and of B -> A each lock their own row, and without a common lock both would
	find no cycle and both commit. The lock is a row every site with BTU has, BTU Chained Task's DocType row, written
	with its own value: the lock ends with the transaction (a named lock, GET_LOCK, would outlive it on MariaDB), and
	on Postgres, whose REPEATABLE READ snapshot would hide the first save's links from the second, the second's write
	fails as a concurrent update instead of passing. Nothing else writes that row but a migrate."""
	frappe.db.sql("update `tabDocType` set name = name where name = %s", "BTU Chained Task")


def chain_edges() -> dict[str, set[str]]:
	"""Every saved Task's chained tasks: task -> the tasks it starts. A locking read: under REPEATABLE READ a plain one
	would read this transaction's snapshot, older than the chain lock and the links committed before it was taken."""
	edges: dict[str, set[str]] = {}
	rows = frappe.db.sql(
		"select parent, next_task from `tabBTU Chained Task` where parenttype = %s for update", "BTU Task"
	)
	for parent, next_task in rows:
		edges.setdefault(parent, set()).add(next_task)
	return edges
