"""A run's row as the reconciler compiles it: one immutable type per source of runs (`btu.shared.run_kind.RunKind`),
each built by its source from the row SQL returned (`btu/scheduler_daemon/reads/sources/`).

The compile step (`reconcile/row_compile.py`) reads the same attributes of every row: its key's text, its Task and
what the job takes of it, its own queue and argument overrides, whether it is paused. What differs by source is a
method of its type: the columns its spec is made of (`spec_columns`), where a cursor new to the state starts
(`first_cursors`), whether a new one resumes after its newest Task Log (`resumes_after_logs`).

The attributes hold the values as SQL returned them, unchecked: a row written by SQL may hold anything, and the
compile step is the one that refuses a bad value, naming its field. A million rows are built at a cold start, so these
are slotted dataclasses: a schedule's costs about 2.5 µs more to build than the dict it replaced (frozen, each field is
set through object.__setattr__), about 1% of what reading and compiling the row costs.

Light: loaded by the Frappe side's task runner, which must not load the schedule rules before its call.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Any, ClassVar

from btu.shared.run_kind import RunKey, RunKind

if TYPE_CHECKING:
	from btu.shared.schedule import ScheduleSpec


@dataclass(frozen=True, slots=True)
class RunPolicy:
	"""How a source's runs treat missed slots and a slot whose previous run still runs, when the source fixes it (a
	schedule's are its own columns): the spec's columns of the same names."""

	catch_up_policy: str
	catch_up_window: int  # seconds
	overlap_policy: str

	def columns(self) -> dict[str, Any]:
		"""The policy as the spec columns it stands for."""
		return {
			"catch_up_policy": self.catch_up_policy,
			"catch_up_window": self.catch_up_window,
			"overlap_policy": self.overlap_policy,
		}


@dataclass(frozen=True, slots=True)
class RunRow(ABC):
	"""What the compile step reads of any run's row; a source's type adds its own columns and behaviour."""

	kind: ClassVar[RunKind]
	# Whether a state new to Redis starts after the run's newest logged slot (a schedule's Logs outlive Redis's data).
	resumes_after_logs: ClassVar[bool] = False

	name: str  # the run's key text (`RunKey.format`): its name in the state
	task: Any  # the Task the row names, as the errors name it
	task_name: Any  # that Task's own name; None when no BTU Task has it
	function: Any  # the dotted path the job calls
	arguments: Any  # the Task's keyword arguments, JSON text
	argument_overrides: Any  # the row's own over them, JSON text
	queue_name: Any  # the row's own queue type, over the Task's
	task_queue_name: Any
	max_task_duration: Any  # seconds; empty: the queue's timeout
	description: Any
	max_concurrent_runs: Any  # the Task's limit; 0 or empty: none
	paused: Any
	modified: Any

	@classmethod
	def key_text(cls, name: str) -> str:
		"""The key text of the source's row named `name`."""
		return RunKey(cls.kind, name).format()

	@abstractmethod
	def spec_columns(self) -> Mapping[str, Any]:
		"""The row as the BTU Task Schedule columns its spec is made of (`ScheduleSpec.from_row`)."""

	@abstractmethod
	def first_cursors(
		self, spec: ScheduleSpec, logged_slot: str | None, system_tz: str | None, now: datetime
	) -> tuple[datetime | None, datetime | None]:
		"""Where the compiled row's cursor starts: (if new to the state, if changed). `logged_slot`: the newest logged
		slot of a row that `resumes_after_logs` and is new to the state."""


def task_columns(row: Mapping[str, Any]) -> dict[str, Any]:
	"""The `RunRow` fields a schedule's or a request's join with its Task gives (SQL's `task_*` columns)."""
	return {
		"task": row.get("task"),
		"task_name": row.get("task_name"),
		"function": row.get("task_function_string"),
		"arguments": row.get("task_arguments"),
		"argument_overrides": row.get("argument_overrides"),
		"queue_name": row.get("queue_name"),
		"task_queue_name": row.get("task_queue_name"),
		"max_task_duration": row.get("task_max_task_duration"),
		"description": row.get("task_desc_short"),
	}
