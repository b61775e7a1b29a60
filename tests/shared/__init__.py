"""Tests of btu.shared, the Frappe-free layer both halves import."""
