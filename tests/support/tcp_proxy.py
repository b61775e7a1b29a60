"""A loopback TCP proxy that can cut every connection: a database outage without stopping the database."""

from __future__ import annotations

import socket
import threading

from tests.support.ports import claim_port


class TcpProxy:
	"""Forwards 127.0.0.1:<port> to a target; `down()` refuses and cuts every connection, `up()` serves again."""

	def __init__(self, target_host: str, target_port: int):
		self.target = (target_host, target_port)
		# Claimed, not probed: after down() no client socket or other test may take it before up().
		self.port = claim_port()
		self.listener: socket.socket | None = None
		self.connections: list[socket.socket] = []
		self.lock = threading.Lock()

	def up(self) -> None:
		listener = socket.socket()
		listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
		listener.bind(("127.0.0.1", self.port))
		listener.listen(64)
		self.listener = listener
		threading.Thread(target=self._accept, args=(listener,), daemon=True).start()

	def down(self) -> None:
		listener, self.listener = self.listener, None
		if listener is not None:
			try:
				listener.shutdown(socket.SHUT_RDWR)
			except OSError:
				pass
			listener.close()
		with self.lock:
			connections, self.connections = self.connections, []
		for conn in connections:
			try:
				conn.shutdown(socket.SHUT_RDWR)
			except OSError:
				pass
			conn.close()

	def _accept(self, listener: socket.socket) -> None:
		while True:
			try:
				client, _ = listener.accept()
			except OSError:
				return
			try:
				upstream = socket.create_connection(self.target, timeout=5)
				upstream.settimeout(None)
			except OSError:
				client.close()
				continue
			with self.lock:
				self.connections += [client, upstream]
			for source, sink in ((client, upstream), (upstream, client)):
				threading.Thread(target=self._pipe, args=(source, sink), daemon=True).start()

	@staticmethod
	def _pipe(source: socket.socket, sink: socket.socket) -> None:
		try:
			while True:
				data = source.recv(65536)
				if not data:
					break
				sink.sendall(data)
		except OSError:
			pass
		finally:
			for sock in (source, sink):
				try:
					sock.shutdown(socket.SHUT_RDWR)
				except OSError:
					pass
