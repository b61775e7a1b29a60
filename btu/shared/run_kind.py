"""What kind of run a fire is, and the key that names a run in the scheduler's state and its jobs.

Three sources of runs share the scheduler's state and its fire path: BTU Task Schedules, BTU Run Requests (retries,
backfilled slots, chained runs, enqueue_at) and Frappe's Scheduled Job Types. Their rows live in three tables, so two
of them may share a name, while in Redis a run is one member of its site's set of schedules and one part of its jobs'
ids. A run is therefore named there by its key's text (`RunKey.format`): a schedule's own name, any other kind's name
behind its kind ("run-request:RR-1", "frappe-job:app.daily"), as BTU wrote it before the kind was a field, so state
and job ids written then read the same. This module is the only one that writes or reads that text.
"""

from __future__ import annotations

from enum import Enum
from typing import NamedTuple


class RunKind(str, Enum):
	"""Which source a run comes from, and so which of the task runner's paths runs it."""

	SCHEDULE = "schedule"
	RUN_REQUEST = "run-request"
	FRAPPE_JOB = "frappe-job"

	def qualifier(self) -> str:
		"""What stands before a name of this kind in its key's text: nothing for a schedule, which keeps its own."""
		return _QUALIFIERS[self]


_QUALIFIERS = {kind: "" if kind is RunKind.SCHEDULE else f"{kind.value}:" for kind in RunKind}
# A schedule's key would read as another kind's if its name started so: the Desk and the reconciler refuse such names.
RESERVED_STARTS = tuple(_QUALIFIERS[kind] for kind in RunKind if kind is not RunKind.SCHEDULE)


class RunKey(NamedTuple):
	"""A run as the scheduler knows it: its kind and its row's name in that kind's table. A tuple: a reconcile makes
	one for every row it reads."""

	kind: RunKind
	name: str

	def format(self) -> str:
		"""The key's text: the run's name in Redis, in its jobs' ids and kwargs, in the scheduler's log and RPC."""
		return _QUALIFIERS[self.kind] + self.name

	@classmethod
	def parse(cls, text: str) -> RunKey:
		"""The key whose text `text` is; any text is a key (a schedule's when no other kind's qualifier starts it)."""
		if text.startswith(RESERVED_STARTS):
			for kind in RunKind:
				qualifier = _QUALIFIERS[kind]
				if qualifier and text.startswith(qualifier):
					return cls(kind, text[len(qualifier) :])
		return cls(RunKind.SCHEDULE, text)

	@classmethod
	def of(cls, kind: RunKind, text: str) -> RunKey:
		"""The key of `kind` whose text is `text`; a ValueError when `text` is no key of that kind's."""
		run = cls.parse(text)
		if run.kind is not kind:
			raise ValueError(f"{text!r} is not the key of a run of kind {kind.value!r}")
		return run

	def reads_back(self) -> bool:
		"""Whether its text parses to this key: a schedule named like another kind's key text does not."""
		return self.kind is not RunKind.SCHEDULE or not self.name.startswith(RESERVED_STARTS)

	@staticmethod
	def match(kind: RunKind) -> str:
		"""The Redis MATCH pattern of every key text of `kind`, which is not SCHEDULE."""
		return f"{_QUALIFIERS[kind]}*"
