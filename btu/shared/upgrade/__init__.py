"""The original BTU's (Datahenge's) rows as this BTU reads them: pure converters the upgrade patches call.

Frappe-free, like the rest of btu.shared, so tier 1 tests them; btu.btu_core.upgrade applies them to the tables.
"""
