"""btu.btu_core.alerts.webhook_post: internal addresses refused after resolving, posts signed as Frappe's Webhook
signs them, and one deadline for the whole exchange; against real local servers."""

from __future__ import annotations

import base64
import hashlib
import hmac
import socket
import threading
import time
from http.server import BaseHTTPRequestHandler, HTTPServer

import pytest

from btu.btu_core.alerts import webhook_post
from btu.btu_core.alerts.webhook_post import DeliveryFailed, WebhookRefused
from btu.btu_core.tests.webhook_servers import dribbling_server
from tests.support.slack import patient

LOCAL = ["127.0.0.1"]  # the test servers listen on loopback: allowed as btu_webhook_allowed_hosts would allow them


class Receiver(BaseHTTPRequestHandler):
	def do_POST(self):
		self.server.received.append((dict(self.headers), self.rfile.read(int(self.headers["Content-Length"]))))
		self.send_response(204)
		self.end_headers()

	def log_message(self, *args):
		pass


@pytest.fixture
def receiver():
	server = HTTPServer(("127.0.0.1", 0), Receiver)
	server.received = []
	threading.Thread(target=server.serve_forever, daemon=True).start()
	yield server
	server.shutdown()
	server.server_close()


@pytest.fixture
def listener():
	"""A bare listening socket: a connection to it would show in its backlog (accepted here to check)."""
	with socket.socket() as sock:
		sock.bind(("127.0.0.1", 0))
		sock.listen()
		sock.settimeout(0.2)
		yield sock


def connected(listener: socket.socket) -> bool:
	try:
		listener.accept()[0].close()
	except TimeoutError:
		return False
	return True


@pytest.mark.parametrize(
	"host",
	["169.254.169.254", "127.0.0.1", "[::1]", "0x7f000001", "2130706433", "localhost", "[::ffff:127.0.0.1]",
	 "10.0.0.5", "192.168.1.1", "100.100.100.200", "0.0.0.0", "224.0.0.1", "[fd00:ec2::254]"],
)  # fmt: skip
def test_an_internal_address_is_refused_after_resolving_and_never_connected(host, listener):
	port = listener.getsockname()[1]
	with pytest.raises(WebhookRefused) as refused:
		webhook_post.post(f"http://{host}:{port}/latest/meta-data", b"{}", secret="s", timeout_secs=2)
	assert "resolves to" in str(refused.value) and "btu_webhook_allowed_hosts" in str(refused.value)
	assert not connected(listener), "a refused webhook never opens a connection"


def test_every_address_a_name_resolves_to_is_checked(monkeypatch):
	"""A name with one public and one internal address is refused: the connection could take either."""
	answers = [
		(socket.AF_INET, socket.SOCK_STREAM, 6, "", ("93.184.216.34", 80)),
		(socket.AF_INET, socket.SOCK_STREAM, 6, "", ("127.0.0.1", 80)),
	]
	monkeypatch.setattr(socket, "getaddrinfo", lambda *args, **kwargs: answers)
	with pytest.raises(WebhookRefused, match="resolves to 127.0.0.1, a loopback address"):
		webhook_post.post("http://rebind.example.com/", b"{}", secret="s", timeout_secs=2)


def test_the_post_connects_to_the_address_checked_not_to_a_second_lookup(monkeypatch, receiver):
	"""DNS rebinding: the name is looked up once; whatever a later lookup would answer is never asked."""
	real = socket.getaddrinfo
	lookups = []

	def once(host, *args, **kwargs):
		lookups.append(host)
		if len(lookups) > 1:
			return [(socket.AF_INET, socket.SOCK_STREAM, 6, "", ("169.254.169.254", 80))]
		return real("127.0.0.1", *args, **kwargs)

	monkeypatch.setattr(socket, "getaddrinfo", once)
	assert (
		webhook_post.post(
			f"http://hooks.internal:{receiver.server_port}/h",
			b"{}",
			secret="s",
			allowed_hosts=["hooks.internal"],
			timeout_secs=5,
		)
		== 204
	)
	assert lookups == ["hooks.internal"]
	assert receiver.received[0][0]["Host"] == f"hooks.internal:{receiver.server_port}"


def test_a_public_address_passes_and_a_listed_internal_host_is_allowed():
	assert (
		webhook_post.internal_kind("93.184.216.34") is None and webhook_post.internal_kind("2606:2800:220:1::1") is None
	)
	assert webhook_post.internal_kind("169.254.169.254").startswith("link-local")
	where = webhook_post.target("http://127.0.0.1:9/")
	assert webhook_post.addresses(where, [" 127.0.0.1 "], time.monotonic() + 2) == [(socket.AF_INET, ("127.0.0.1", 9))]


@pytest.mark.parametrize(
	"url",
	[
		"file:///etc/passwd",
		"gopher://127.0.0.1:25/",
		"not a url",
		"http://",
		"javascript:alert(1)",
		"http://user:pw@h.example.com/",
		"http://h.example.com:99999/",
	],
)
def test_a_url_that_is_not_plain_http_is_refused(url):
	with pytest.raises(WebhookRefused):
		webhook_post.target(url)


def test_each_post_is_signed_with_the_rules_secret_as_frappe_signs(receiver):
	body = b'{"event": "opened", "incident": "INC-1"}'
	status = webhook_post.post(
		f"http://127.0.0.1:{receiver.server_port}/hook?x=1",
		body,
		secret="rule-secret",
		allowed_hosts=LOCAL,
		timeout_secs=5,
	)
	assert status == 204
	[(headers, received)] = receiver.received
	assert received == body
	expected = base64.b64encode(hmac.new(b"rule-secret", body, hashlib.sha256).digest()).decode()
	assert headers[webhook_post.SIGNATURE_HEADER] == expected
	assert headers["Content-Type"] == "application/json" and headers["User-Agent"] == "BTU alerts"


def test_one_deadline_bounds_a_server_that_answers_a_byte_at_a_time():
	"""Each byte comes within any per-read timeout; the whole answer never does. The POST gives up at the deadline."""
	with dribbling_server(b"HTTP/1.1 200 OK and never the end of the line") as url:
		started = time.monotonic()
		with pytest.raises(DeliveryFailed, match=r"did not answer within 1 s"):
			webhook_post.post(url, b"{}", secret="s", allowed_hosts=LOCAL, timeout_secs=1)
	assert time.monotonic() - started < patient(2)  # the 1 s deadline held: without it the answer never ends


def test_a_closed_port_fails_saying_so():
	with socket.socket() as probe:
		probe.bind(("127.0.0.1", 0))
		closed = probe.getsockname()[1]
	with pytest.raises(DeliveryFailed, match="accepts a connection"):
		webhook_post.post(f"http://127.0.0.1:{closed}/", b"{}", secret="s", allowed_hosts=LOCAL, timeout_secs=2)
