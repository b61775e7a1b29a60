"""The original BTU's (Datahenge's) rows as this BTU reads them: pure converters the upgrade calls.

Frappe-free (no frappe here, nor in the packages above), so tier 1 tests them; the modules of btu.btu_core.upgrade
apply them to the tables.
"""
