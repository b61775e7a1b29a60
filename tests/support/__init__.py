"""Real services for tests and benchmarks: a private redis-server, MariaDB, RQ workers."""
