"""Bringing the Redis state in line with the sites' databases.

`reconciler.py` is the front (`full`, `stagger`, `sync`, `health`, `snapshot`); `cycles.py` runs the cycles over the
sites; `site_sync.py` brings one site in line under the lock of `lock.py`, its rows read by `site_rows.py` and compiled
by `site_compiler.py` (the pure compile of a row: `row_compile.py`); `site_health.py` says which sites are held or
unreachable; `frappe_job_sites.py` which sites' Scheduled Job Types BTU fires.
"""
