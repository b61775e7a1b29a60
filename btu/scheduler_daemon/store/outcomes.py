"""The outcomes the firing scripts (`lua/prepare.lua`, `lua/release.lua`) report, named once for Python.

Each value is the script's own string: the site's counters, the recent fires, the log lines and the metrics carry it
as the script wrote it. tests/setup/test_lua_outcomes.py reads the scripts, so a script reporting a string not named
here fails it.
"""

from __future__ import annotations

from enum import Enum


class Outcome(str, Enum):
	"""An outcome that prints as its value, as `enum.StrEnum` does from Python 3.11 on (3.10 has none): a plain
	`(str, Enum)` member formats as "Class.MEMBER" in an f-string or a log line."""

	__str__ = str.__str__
	__format__ = str.__format__


class ItemOutcome(Outcome):
	"""What prepare.lua did with an item (a schedule's fires in one prepare), as `state.ItemResult` reads it."""

	# Its jobs were written, each a `JobOutcome`: the script returns their list, which `ItemResult` names so.
	WRITTEN = "prepared"
	STALE = "stale"  # its cursor moved meanwhile: edited, or fired by another leader
	CORRUPT = "corrupt"  # its state held a wrong value: moved aside, rebuilt from its row
	# "failed: <error>": a write was refused, the slot stays unclaimed. The script marks the item's jobs so too, in
	# a list it then drops for this answer.
	FAILED = "failed"


class JobOutcome(Outcome):
	"""What prepare.lua did with each job of an item it wrote."""

	PREPARED = "prepared"  # written, on no queue until release.lua pushes it
	# Its job id exists already (a fire of another leader): counted under this name in the site's counters, and
	# kept in its recent fires.
	DUPLICATE = "duplicate"


class FireOutcome(Outcome):
	"""What release.lua did with a prepared fire whose moment came, as `state.Released` reads it."""

	# The next three are counted under their own names in the site's counters and kept in its recent fires.
	ENQUEUED = "enqueued"
	SKIPPED_OVERLAP = "skipped_overlap"  # the schedule's previous job is still queued or started
	SKIPPED_CONCURRENCY = "skipped_concurrency"  # its Task has that many jobs queued or started
	RETURNED = "returned"  # past the misfire grace: withdrawn, the schedule's catch-up policy decides
	QUARANTINED = "quarantined"  # "quarantined: <why>": not a member prepare.lua writes, or its job hash is gone
	PUSH_REFUSED = "push_refused"  # "push_refused: <why>": its queue refused the push; kept prepared
