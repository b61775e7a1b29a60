"""A stand-in for `bench worker` as BTU sees it: a process that starts its scheduler candidate, as btu/commands.py
does in a worker, then waits until it is killed (SIGTERM: a warm shutdown; SIGKILL: a crash).

	python -m tests.engine.fake_worker BENCH
"""

from __future__ import annotations

import signal
import sys
import time

from btu.scheduler_daemon.leading import worker_candidate

if __name__ == "__main__":
	signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
	candidate = worker_candidate.start(sys.argv[1])
	print(f"candidate {candidate.pid if candidate else 'none'}", flush=True)
	while True:
		time.sleep(3600)
