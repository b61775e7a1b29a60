"""`python -m tests.support.keep_running CMD...`: run CMD again whenever it exits, as supervisor does `bench worker`.

An rq worker quits when Redis fails under it (a master failover); production
restarts it, and so does this. SIGTERM is passed on and ends the loop.
"""

from __future__ import annotations

import signal
import subprocess
import sys
import time


def main() -> int:
	command = sys.argv[1:]
	stopping = False
	child: subprocess.Popen | None = None

	def stop(signum, frame):
		nonlocal stopping
		stopping = True
		if child is not None and child.poll() is None:
			child.send_signal(signal.SIGTERM)

	signal.signal(signal.SIGTERM, stop)
	while not stopping:
		child = subprocess.Popen(command)
		child.wait()
		if not stopping:
			print(f"keep_running: {command[0]} exited with {child.returncode}; starting it again", flush=True)
			time.sleep(0.5)
	return 0


if __name__ == "__main__":
	raise SystemExit(main())
