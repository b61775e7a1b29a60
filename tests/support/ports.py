"""Ports for the tests' own servers: claimed for the whole test process, never merely probed.

A port found free by binding to port 0 can be taken before the test's server binds it: the kernel
hands ports of its ephemeral range to every client socket, and other test processes (pytest-xdist
workers, the legs of scripts/test side by side) look for ports at the same moment. So a test server
takes a port below the ephemeral range, which no client socket gets, and claims it with an
exclusive lock on a file every BTU test process honours. The claim lasts as long as the process,
so a server restarted on its own port finds it still free, and a port claimed to stay closed
("nothing listens here") stays closed.
"""

from __future__ import annotations

import errno
import fcntl
import os
import random
import socket
import tempfile
from pathlib import Path

LOCK_DIR = Path(tempfile.gettempdir()) / "btu-test-ports"
FIRST_PORT = 20000


def ephemeral_start() -> int:
	try:
		return int(Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()[0])
	except (OSError, ValueError, IndexError):
		return 32768


LAST_PORT = ephemeral_start() - 1
_claimed: dict[int, int] = {}  # port -> the file descriptor holding its lock


def bindable(port: int) -> bool:
	with socket.socket() as sock:
		sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
		try:
			sock.bind(("127.0.0.1", port))
		except OSError as error:
			if error.errno == errno.EADDRINUSE:
				return False
			raise
	return True


def claim_port() -> int:
	"""A loopback port no other test process will use and nothing listens on now."""
	LOCK_DIR.mkdir(exist_ok=True)
	span = LAST_PORT - FIRST_PORT + 1
	# Processes start at random places so that they seldom try the same ports.
	start = random.randrange(span)
	for offset in range(span):
		port = FIRST_PORT + (start + offset) % span
		if port in _claimed:
			continue
		fd = os.open(LOCK_DIR / f"{port}.lock", os.O_CREAT | os.O_RDWR, 0o666)
		try:
			fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
		except BlockingIOError:
			os.close(fd)
			continue
		if bindable(port):
			_claimed[port] = fd
			return port
		os.close(fd)
	raise RuntimeError(f"no free port left between {FIRST_PORT} and {LAST_PORT} for a test server")
