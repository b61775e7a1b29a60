"""BTU Run Request rows, which the scheduler fires (`btu.shared.run_requests`): inserting, announcing, loading, marking
Done and cancelling them. Retries (`retries`), chained runs (`chains`) and backfills (`backfill`) are requests.

Each is inserted under a name derived from what it is for, so a second ask
(a second worker, a second click, a failover that runs the asking code
again) finds the row and adds nothing. The scheduler is told after commit,
as for a schedule's save; its full reconcile reads pending requests anyway.
The task runner marks a request Done in the transaction that inserts its
run's "Started" Log.
"""

from __future__ import annotations

from datetime import datetime, timedelta

import frappe
from frappe import _
from frappe.utils import cint, flt

from btu.btu_core.instants import to_system_naive, utc_now
from btu.btu_core.scheduler_link import announce_after_commit
from btu.btu_core.sealed import store
from btu.shared import protocol
from btu.shared import run_requests as rr
from btu.shared.instants import format_utc_iso, parse_utc_iso
from btu.shared.run_kind import RunKey, RunKind


def insert(name: str, *, run_at: datetime, exact: bool = False, **values) -> tuple[object, bool]:
	"""The request `name` (inserted with `values` unless there): (doc, whether this call inserted it).

	`run_at` is rounded up to a whole second unless `exact` (a retry's delay, enqueue_at's moment): then to the
	millisecond. The row alone is written (defaults, stamps, one INSERT): a BTU Run Request has no validation or hooks
	of its own and every caller checks its values, and enqueue_at is called in bulk from request handlers. A name
	already there, from this ask before or from another delivery that committed first, is the duplicate key."""
	run_at = rr.millisecond_after(run_at) if exact else rr.whole_second_after(run_at)
	doc = frappe.get_doc(
		{
			"doctype": rr.DOCTYPE,
			"name": name,
			"run_at": to_system_naive(run_at),
			"run_at_utc": format_utc_iso(run_at, milliseconds=bool(run_at.microsecond)),
			**values,
		}
	)
	doc._set_defaults()
	doc.set_user_and_timestamp()
	doc.set_docstatus()
	try:
		doc.db_insert()
	except frappe.DuplicateEntryError:
		# A locking read sees the row even when another transaction committed it after ours began.
		return frappe.get_doc(rr.DOCTYPE, name, for_update=True), False
	if doc.status == rr.PENDING:
		announce(name)
	return doc, True


def announce(name: str) -> None:
	"""Tell the scheduler about the request (or that it is no longer pending) once this transaction commits. Quietly:
	most are a run's own (its Done, its retry, its chain), in a worker with no one to show the reply to, where the
	realtime message would load Frappe's response encoder and Document on every run; the reply is logged."""
	run = RunKey(RunKind.RUN_REQUEST, name).format()
	announce_after_commit(protocol.CREATE_TASK_SCHEDULE, run, only_if_running=True, quiet=True)


# -- a request's run ------------------------------------------------------------------


def load(name: str):
	"""The request as a row (fields as attributes), or None when it is gone.
	A row, not a Document: this is read before every request's run, and a Document costs a forked work-horse its
	import and its DocType's Meta."""
	rows = frappe.db.sql(f"select * from `tab{rr.DOCTYPE}` where name = %s", name, as_dict=True)
	if not rows:
		return None
	row = rows[0]
	for field, value in store.read(rr.DOCTYPE, [name]).get(name, {}).items():
		row[field] = row.get(field) or value  # its column's, when SQL wrote one (shared.sealed.value_sql)
	return row


def mark_done(request, log_name: str | None, note: str | None = None, *, tell_scheduler: bool = True) -> None:
	"""In the caller's transaction: the request ran (or its slot had run), as Log `log_name`; the scheduler drops it
	after commit. One UPDATE (frappe.db.set_value would load Frappe's query engine before the run). A run marking its
	own request passes `tell_scheduler=False` and `announce`s after its call: the RPC waits for the scheduler's reply,
	and the Done request's state fires nothing meanwhile (its one moment is past; a full reconcile drops it too)."""
	values = {
		"status": rr.DONE,
		"log": log_name,
		"modified": to_system_naive(utc_now()),
		"modified_by": frappe.session.user,
	}
	if note:
		values["note"] = "\n".join(filter(None, [request.note, note]))
	assignments = ", ".join(f"`{field}` = %s" for field in values)
	frappe.db.sql(f"update `tab{rr.DOCTYPE}` set {assignments} where name = %s", [*values.values(), request.name])
	if tell_scheduler:
		announce(request.name)


def check_may_cancel(request) -> None:
	"""Raise frappe.PermissionError unless the session user may withdraw `request`: an enqueued run only the user who
	enqueued it, a System Manager or Administrator (a BTU Manager withdraws retries and backfills, not another user's or
	another app's jobs); any other request whoever reached this (api.cancel_run_request checks BTU's roles first)."""
	user = frappe.session.user
	if (
		request.origin != rr.ENQUEUE
		or user in ("Administrator", request.enqueued_by)
		or "System Manager" in frappe.get_roles(user)
	):
		return
	frappe.throw(
		_("Run request {0}: enqueued by {1}; only that user or a System Manager may cancel it").format(
			request.name, request.enqueued_by
		),
		frappe.PermissionError,
		title=_("Not permitted"),
	)


def cancel(request) -> None:
	"""Withdraw a request that has not run; a backfill's waiting ones after it are withdrawn too."""
	check_may_cancel(request)
	if request.status not in (rr.PENDING, rr.WAITING):
		frappe.throw(
			_("Run request {0} is {1}; only a Pending or Waiting one can be cancelled").format(
				request.name, request.status
			)
		)
	chain = [request.name]
	while True:
		following = frappe.db.get_value(rr.DOCTYPE, {"previous_request": chain[-1], "status": rr.WAITING}, "name")
		if not following:
			break
		chain.append(following)
	for name in chain:
		frappe.db.set_value(rr.DOCTYPE, name, "status", rr.CANCELLED)
	announce(request.name)
