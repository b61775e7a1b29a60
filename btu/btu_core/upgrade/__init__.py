"""The upgrade in place from the original BTU (Datahenge's): its rows converted by `bench migrate`.

btu/patches/v1_0 calls `hours` before the DocTypes sync (the original's text `hour` must be a number before its
column becomes an Int) and `rows` after; both only touch what the original left, so on any other site they do
nothing, and a second run changes nothing. What cannot be converted stays as it is and is listed in BTU
Configuration's `upgrade_notes` (`notes`); the Tasks whose functions no app declares are listed live (`undeclared`).
The converters themselves (the original's values as this BTU's: arguments, timing, statuses, Run Later entries,
`btu_tasks` lines) are `convert`'s, Frappe-free so tier 1 tests them.
"""
