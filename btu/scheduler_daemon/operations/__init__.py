"""What an operator sets and reads.

The configuration (`config.py`), metrics (`metrics.py`), Redis ACL grants (`redis_acl.py`), riding out Redis failures
(`redis_failures.py`) and replicas (`replication.py`). The one-line logs are the package's own `log.py`, below every
room; the published status and heartbeats are the leader's (`leading/status.py`).
"""
