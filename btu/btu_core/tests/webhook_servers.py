"""Local servers webhook tests post to; Frappe-free, so that tier 1 (tests/frappe_free) uses them too."""

from __future__ import annotations

import socket
import threading
from collections.abc import Iterator
from contextlib import contextmanager


@contextmanager
def dribbling_server(reply: bytes, every_secs: float = 0.2) -> Iterator[str]:
	"""The URL of a server that reads the request, then sends `reply` a byte every `every_secs`: each byte beats
	any per-read timeout, so only one deadline for the whole exchange stops a client."""
	stop = threading.Event()
	with socket.socket() as server:
		server.bind(("127.0.0.1", 0))
		server.listen()

		def dribble():
			conn, _ = server.accept()
			with conn:
				conn.recv(65536)
				for byte in reply:
					if stop.wait(every_secs):
						return
					conn.sendall(bytes([byte]))

		threading.Thread(target=dribble, daemon=True).start()
		try:
			yield f"http://127.0.0.1:{server.getsockname()[1]}/hook"
		finally:
			stop.set()
