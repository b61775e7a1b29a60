"""How long a run may take: its Task's max duration, else its queue's RQ timeout; past it plus a margin, a run still
"Started" was lost with its worker (the lost-run sweep, the watchdog's stuck runs, overlap_policy skip)."""

from __future__ import annotations

# A run still "Started" this long after its max duration was lost with its worker.
LOST_RUN_MARGIN_SECS = 120


def max_duration(task) -> int:
	"""The Task's max_task_duration, or its queue's RQ timeout when it has none."""
	if task.max_task_duration:
		return int(task.max_task_duration)
	from frappe.utils.background_jobs import get_queues_timeout

	return int(get_queues_timeout().get(task.queue_name) or 300)
