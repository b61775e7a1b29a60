"""What both halves of BTU share, importing no frappe: the Redis protocol and key names
(`protocol`), which functions may run (`declared`), schedule semantics (`schedule`), and
the contract between the scheduler and the task runner (`instants`, `task_args`, `job_contract`)."""
