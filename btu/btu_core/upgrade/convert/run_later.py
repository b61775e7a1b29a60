"""The original BTU's (v13) Run Later entries as this BTU's run requests of origin Enqueue.

The original kept each in a Redis hash on the queue Redis, `btu_scheduler:run_later:<id>`, with its function's
path, JSON arguments, target queue and not-before moment in UTC; a poller Task turned due ones into One-Shot
Tasks. No site is named: on a bench of several sites the first site's poller took it, as the first site's
migrate does here.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import datetime, timezone

from btu.shared.instants import parse_iso
from btu.shared.messages import InputError, _
from btu.shared.run_requests import ENQUEUE, request_name

PATTERN = "btu_scheduler:run_later:*"
PENDING = "pending"


class RunLaterError(InputError):
	"""An entry that cannot become a request; it is left in Redis and listed."""


@dataclass(frozen=True)
class Entry:
	name: str
	method: str
	kwargs: str
	queue: str
	run_at: datetime
	title: str


def entry(key: str, fields: dict[str, str]) -> Entry | None:
	"""The request a pending entry becomes (None: not pending); RunLaterError names the field that is wrong."""
	if fields.get("status") != PENDING:
		return None
	method = (fields.get("path_to_function") or "").strip()
	if not method:
		raise RunLaterError("path_to_function", "", _("is empty; the entry {key} names no function to run"), key=key)
	text = fields.get("arguments") or "{}"
	try:
		arguments = json.loads(text)
	except ValueError:
		raise RunLaterError("arguments", text, _("is not JSON; the entry {key} is left in Redis"), key=key) from None
	if not isinstance(arguments, dict):
		raise RunLaterError(
			"arguments", text, _("is not a JSON object of keyword arguments; the entry {key} is left in Redis"), key=key
		)
	try:
		run_at = parse_iso(fields.get("not_before_time") or "", "not_before_time")
	except ValueError:
		try:
			run_at = datetime.fromtimestamp(int(fields["not_before_timestamp"]), timezone.utc)
		except (KeyError, ValueError):
			raise RunLaterError(
				"not_before_time",
				fields.get("not_before_time"),
				_("is not a moment; the entry {key} is left in Redis"),
				key=key,
			) from None
	if run_at.tzinfo is None:
		run_at = run_at.replace(tzinfo=timezone.utc)  # the original wrote it in UTC
	return Entry(
		name=request_name(ENQUEUE, "run-later", fields.get("uid") or key),
		method=method,
		kwargs=json.dumps(arguments),
		queue=(fields.get("target_queue") or "default").strip(),
		run_at=run_at,
		title=fields.get("short_name") or key,
	)
