"""The leader: who leads, and how it fires.

`lease.py` is the fenced lease; `candidacy.py` and `worker_candidate.py` say who stands for it (a dedicated process, or
a Frappe worker's candidate). `engine.py` is the process's loop: stand by or lead, with a heartbeat and, leading, the
published status (`status.py`). A leader fires through `firing.py` (prepare ahead, release at the moment), planned by
the pure `planner.py`, into the Redis state (`store/`), and `fire_log.py` logs each fire. `reconcile_thread.py` is the
leader's reconcile thread. The top room: it imports from every other, none from it (but `commands/`).
"""
