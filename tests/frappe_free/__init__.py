"""Tests of the Frappe side's Frappe-free modules (tests/setup/test_layout.py's FRAPPE_FREE), which tier 1 imports
without Frappe: the slot lock, the `btu_schedules` hook's entries, the webhook's POST, the run outcomes' counts."""
