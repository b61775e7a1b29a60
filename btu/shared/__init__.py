"""The contract both halves of BTU import, importing no frappe: the Redis protocol and key names (`protocol`, with
`liveness` and `sentinel`), which functions may run (`declared`), schedule semantics (`schedule`), the kinds of run and
their rows (`run_kind`, `run_requests`, `scheduled_jobs`), the contract between the scheduler and the task runner
(`instants`, `task_args`, `job_contract`), user-facing errors (`messages`) and the original BTU's daemon (`old_daemon`).

Only what both halves import lives here (tests/setup/test_layout.py holds it): Frappe-free code only the Frappe side
uses lives beside its user in btu.btu_core, in a module tier 1 imports without Frappe (test_layout's FRAPPE_FREE).
"""
