"""The Frappe side of the BTU scheduler's RPC: commands after commit, status, ping.

Commands go over Frappe's own queue Redis (the one the scheduler watches) and
always name this site. A schedule change is announced only after its
transaction commits, so the scheduler never reads a row that is not there
yet; the reply reaches the user as a realtime alert, and a scheduler that
is down never fails a save (its reconcile reads the table when it starts).
Redis refusing the bench's ACL user is reported as "denied", never as
"unreachable", and a Redis URL is shown with its password masked.
"""

from __future__ import annotations

import json
from functools import partial

import frappe
from frappe import _
from redis.exceptions import RedisError

from btu.shared import liveness, protocol
from btu.shared.keys import NAMESPACE_SETTING, Keys, namespace_problem
from btu.shared.redis_refusals import denied_message, is_denied
from btu.shared.redis_urls import mask_url
from btu.shared.sentinel import SentinelConfigError, SentinelSettings

SYNC_EVENT = "btu_scheduler_sync"


def bench_keys() -> Keys:
	"""BTU's key names for this bench: common_site_config.json's `btu_namespace`, as the scheduler reads it."""
	value = frappe.get_conf().get(NAMESPACE_SETTING)
	if namespace_problem(value):
		frappe.throw(
			_(
				"{0} {1} in common_site_config.json: give 1 to 64 letters, digits, '_', '.' or '-' (a name no other "
				"bench on the same Redis uses), or remove it"
			).format(NAMESPACE_SETTING, repr(value)),
			title=_("BTU: wrong {0}").format(NAMESPACE_SETTING),
		)
	return Keys(value)


def queue_redis():
	from frappe.utils.background_jobs import get_redis_conn

	return get_redis_conn()


def send(request_type: str, request_content: str | None = None) -> protocol.Reply:
	"""One RPC call for this site; Redis refusing the user is a "denied" reply, any other Redis error "unreachable"."""
	keys = bench_keys()
	try:
		return protocol.call(queue_redis(), keys, request_type, request_content, site=frappe.local.site)
	except RedisError as exc:
		if is_denied(exc):  # refused while connecting: WRONGPASS, NOAUTH
			return protocol.Reply("denied", redis_denied(exc), None, 0.0)
		return protocol.Reply(
			"unreachable",
			_(
				"Redis at {0} failed ({1}: {2}); start the bench's redis_queue (bench start, or supervisor) and try "
				"again"
			).format(redis_queue_shown(), type(exc).__name__, exc),
			None,
			0.0,
		)


def redis_queue_shown() -> str:
	"""Where Frappe's get_redis_conn finds the queue Redis: the Sentinel service, or `redis_queue` (password masked)."""
	try:
		sentinel = SentinelSettings.from_config(frappe.conf, "site config")
	except SentinelConfigError as exc:
		return str(exc)
	return sentinel.describe() if sentinel else mask_url(str(frappe.conf.redis_queue))


def redis_denied(exc: RedisError) -> str:
	"""The refusal in one line, naming the user as Frappe's get_redis_conn picks it."""
	from frappe.utils import get_bench_id

	user = (frappe.conf.rq_username or get_bench_id()) if frappe.conf.use_rq_auth else "default"
	return denied_message(exc, user, bench_keys().grant)


def describe(reply: protocol.Reply) -> str:
	"""The reply as the one line a user reads (alert, msgprint, API "message")."""
	if reply.outcome == "ok":
		return _("BTU Scheduler acknowledged ({0} ms).").format(round(reply.round_trip_ms))
	if reply.outcome == "unreachable":
		return _(
			"{0} The change is saved; the scheduler picks it up from the database when it runs (bench btu-scheduler)."
		).format(reply.message)
	if reply.outcome == "denied":
		return _(
			"BTU Scheduler not told: {0}. The change is saved; the scheduler reads it at its next full refresh."
		).format(reply.message)
	return _("BTU Scheduler refused the command: {0}").format(reply.message)


def announce_after_commit(
	request_type: str, schedule: str, *, only_if_running: bool = False, quiet: bool = False
) -> None:
	"""Send `request_type` for `schedule` once the current transaction has committed. `only_if_running`: not when no
	scheduler process is alive (a worker's announcement would wait 5 s for nothing; a scheduler reads the rows when it
	starts). `quiet`: the outcome is logged only, not shown to the user (one of many sent for one change)."""
	frappe.db.after_commit.add(partial(_announce, request_type, schedule, frappe.session.user, only_if_running, quiet))


def scheduler_running() -> bool:
	"""Whether any scheduler process has a live heartbeat; True when Redis cannot tell (sending then reports why)."""
	try:
		return bool(liveness.processes(queue_redis(), bench_keys()))
	except RedisError:
		return True


def fires_frappe_jobs() -> bool:
	"""Whether a BTU scheduler of this bench acknowledges firing this site's Scheduled Job Types now (its leader's
	live key, `Keys.frappe_jobs_ack_key`). False when Redis cannot tell, NOPERM included: Frappe's scheduler
	then fires them, and the slot claims keep each slot to one run."""
	from frappe.utils import get_bench_id

	try:
		return bool(queue_redis().exists(bench_keys().frappe_jobs_ack_key(get_bench_id(), frappe.local.site)))
	except RedisError:
		return False


def _announce(request_type: str, schedule: str, user: str, only_if_running: bool = False, quiet: bool = False) -> None:
	if only_if_running and not scheduler_running():
		frappe.logger("btu").info(
			f"site={frappe.local.site} schedule={schedule} rpc={request_type} not sent: no scheduler process alive"
		)
		return
	request = getattr(frappe.local, "request", None)
	after_response = getattr(request, "after_response", None) if request else None
	if after_response is not None:
		# In a web request the reply wait (up to 5 s when the scheduler is down)
		# must not hold the user's save response: answer after it is sent.
		after_response.add(partial(_send_and_tell, request_type, schedule, user, quiet))
	else:
		_send_and_tell(request_type, schedule, user, quiet)


def _send_and_tell(request_type: str, schedule: str, user: str, quiet: bool = False) -> None:
	reply = send(request_type, schedule)
	text = describe(reply)
	frappe.logger("btu").info(
		f"site={frappe.local.site} schedule={schedule} rpc={request_type} outcome={reply.outcome} "
		f"round_trip_ms={reply.round_trip_ms:.1f}"
	)
	if quiet:
		return
	message = {
		"schedule": schedule,
		"request_type": request_type,
		"outcome": reply.outcome,
		"message": text,
		"round_trip_ms": round(reply.round_trip_ms, 1),
	}
	try:
		frappe.publish_realtime(SYNC_EVENT, message, user=user)
	except Exception:
		frappe.logger("btu").warning(
			f"site={frappe.local.site} schedule={schedule} realtime publish failed", exc_info=True
		)
	if not getattr(frappe.local, "request", None):
		frappe.msgprint(text, title=f"{schedule}: {request_type}", indicator="green" if reply.ok else "orange")


def read_status() -> dict:
	"""The scheduler's published status (`Keys.status`, every minute) with the leader and the processes read live,
	so a heartbeat shown is as fresh as the process wrote it; {} when no scheduler ever ran against this Redis."""
	keys = bench_keys()
	try:
		conn = queue_redis()
		raw = conn.get(keys.status)
		reader = liveness.Reader(conn)
		live = {"leader": liveness.leader(conn, keys, reader), "processes": liveness.processes(conn, keys, reader)}
	except RedisError as exc:
		if is_denied(exc):
			return {"error": redis_denied(exc), "outcome": "denied"}
		return {"error": _("Redis at {0} failed: {1}").format(redis_queue_shown(), exc), "outcome": "unreachable"}
	if not raw and not live["leader"] and not live["processes"]:
		return {}
	try:
		status = json.loads(raw) if raw else {}
	except ValueError:
		return {"error": _("{0} holds something that is not JSON").format(keys.status)}
	return {**(status if isinstance(status, dict) else {}), **live}
