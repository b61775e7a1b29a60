"""The original BTU Task Log's `success_fail` as this BTU's `status`."""

from __future__ import annotations

LOG_STATUS = {"In-Progress": "Started", "Success": "Succeeded", "Failed": "Failed", "Timeout": "Timed Out"}
# A value the original never wrote; the row keeps it in its `success_fail` column and is listed.
UNKNOWN_STATUS = "Failed"


def log_status(success_fail: str | None) -> tuple[str, bool]:
	"""This BTU's status for an original `success_fail`, and whether it was one the original wrote."""
	text = (success_fail or "").strip()
	if text in LOG_STATUS:
		return LOG_STATUS[text], True
	return UNKNOWN_STATUS, False
