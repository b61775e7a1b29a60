"""Sealed values on the Frappe side: their table, the Documents that keep them there, and their Versions."""
