"""What an operator sets and reads.

The configuration (`config.py`), the one-line logs (`log.py`), metrics (`metrics.py`), the published status and
heartbeats (`status.py`), Redis ACL grants (`redis_acl.py`), riding out Redis failures (`redis_failures.py`) and
replicas (`replication.py`).
"""
