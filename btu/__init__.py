"""BTU: Background Tasks Unleashed, a task scheduler for Frappe.

Importing this package must never import frappe: the scheduler process
(`btu.scheduler_daemon`) runs outside Frappe.
"""

from btu.shared.declared import runnable  # noqa: F401  (apps write `from btu import runnable`)

__version__ = "0.1.0"
