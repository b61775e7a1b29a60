"""The leader: who leads, and how it fires.

`lease.py` is the fenced lease; `candidacy.py` and `worker_candidate.py` say who stands for it (a dedicated process, or
a Frappe worker's candidate). `engine.py` is the process's loop: stand by or lead. A leader fires through
`firing.py` (prepare ahead, release at the moment), planned by the pure `planner.py` from the job shapes of `jobs.py`;
`state.py` is the one module that writes Redis, through the Lua scripts in `lua/` (`scripts.py` loads them) whose
outcomes `outcomes.py` names and `fire_log.py` logs. `reconcile_thread.py` is the leader's reconcile thread.
"""
