"""The original BTU's Run Later entries (v13, in the queue Redis) as pending BTU Run Requests, each key deleted once
its request is committed; one that cannot convert stays in Redis and is listed."""

from __future__ import annotations

import frappe
from frappe.utils.background_jobs import get_redis_conn

from btu.btu_core.runs import run_requests
from btu.btu_core.runs.task_inputs import TaskInputError, resolve_function
from btu.btu_core.upgrade import notes
from btu.btu_core.upgrade.convert.run_later import PATTERN, RunLaterError, entry
from btu.shared import run_requests as rr

ADMINISTRATOR = "Administrator"


def convert(redis_conn=None, pattern: str = PATTERN) -> list[dict]:
	"""Each pending entry as a request; the notes of those left in Redis or naming an undeclared function."""
	redis_conn = redis_conn or get_redis_conn()
	found = []
	for key in redis_conn.scan_iter(match=pattern, count=500):
		key = key.decode() if isinstance(key, bytes) else key
		fields = {_text(k): _text(v) for k, v in redis_conn.hgetall(key).items()}
		try:
			request = entry(key, fields)
		except RunLaterError as exc:
			found.append(notes.note("Run Later", key, exc.field, exc.value, exc.problem))
			continue
		if request is None:
			continue
		run_requests.insert(
			request.name,
			run_at=request.run_at,
			exact=True,
			status=rr.PENDING,
			origin=rr.ENQUEUE,
			method=request.method,
			kwargs=request.kwargs,
			queue=request.queue,
			timeout=0,
			attempt=1,
			enqueued_by=ADMINISTRATOR,
			run_as=ADMINISTRATOR,
			task_log=1,
			note=f"From the original BTU's Run Later {request.title}",
		)
		try:
			resolve_function(request.method, "method")
		except TaskInputError as exc:
			found.append(
				notes.note(
					rr.DOCTYPE,
					request.name,
					"method",
					request.method,
					f"{str(exc).removeprefix(f'method {request.method!r}: ')}; the request fails until it is declared",
				)
			)
		frappe.db.commit()
		redis_conn.delete(key)
	return found


def _text(value) -> str:
	return value.decode() if isinstance(value, bytes) else value
