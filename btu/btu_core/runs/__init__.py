"""Runs: what happens when a job fires, a module per kind of run, and the Task Log each run writes.

`btu.btu_core.task_runner` (the path the scheduler's jobs name) dispatches a job by its kind to `task_run` (a Task
run: a schedule's slot, a retry, a backfilled slot, a chained run, Run Now), `enqueue` (a function `btu.enqueue_at`
asked for) or `frappe_jobs` (a Frappe Scheduled Job Type's slot). `run_requests` are the retries, backfills, chains and
enqueued calls waiting as BTU Run Request rows; `task_inputs` what must hold before a Task runs; `time_limit` how long a
run may take; `slot_claim` the database lock under which a delivery looks for its slot's Log (Frappe-free,
for tier 1). The Log: `run_rows` writes it as rows, `capture` records the call into it, `lost_runs` ends the Logs of
runs whose worker died, `retention` deletes old Logs and finished requests.
"""
