"""BTU: Background Tasks Unleashed, a task scheduler for Frappe.

Importing this package must never import frappe: the scheduler process
(`btu.scheduler_daemon`) runs outside Frappe. `btu.enqueue_at`,
`btu.enqueue_in` and `btu.cancel` (btu.btu_core.runs.enqueue) are looked up on
first use, inside Frappe.
"""

from btu.shared.declared import runnable  # noqa: F401  (apps write `from btu import runnable`)

__version__ = "1.0.0"

_FRAPPE_API = ("enqueue_at", "enqueue_in", "cancel")


def __getattr__(name: str):
	if name in _FRAPPE_API:
		from btu.btu_core.runs import enqueue

		return getattr(enqueue, name)
	raise AttributeError(f"module 'btu' has no attribute {name!r}")
