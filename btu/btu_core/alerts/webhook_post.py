"""An alert webhook's POST: where it may go, how it is signed, how long it may take.

A webhook makes this host send a request wherever its URL points, so the URL is checked after its host is
resolved: every address it resolves to must be public. Loopback, private, link-local (the cloud metadata services
at 169.254.169.254 among them), multicast, unspecified and reserved addresses are refused, however they are written
(`0x7f000001`, `[::1]`, `[::ffff:127.0.0.1]`, a name that resolves there), unless the host is one the site's config
allows (`btu_webhook_allowed_hosts`). The POST connects to one of the addresses checked, never to a second lookup's
answer, which could differ (DNS rebinding); TLS still checks the certificate against the URL's host name.

One deadline bounds the whole exchange, from the lookup to the response's status line: a server that answers a
byte at a time cannot hold the caller (a web worker, during a test alert) longer than that. Only the status line is
read. No proxy is used (HTTP_PROXY and the like): a proxy would resolve the name itself, after the check.

Each POST is signed as Frappe's Webhook signs its posts: the base64 of the HMAC-SHA256 of the body under the rule's
secret, in the SIGNATURE_HEADER header, so the receiver can tell BTU's posts from anyone else's.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import ipaddress
import re
import socket
import ssl
import threading
import time
from collections.abc import Iterable
from dataclasses import dataclass
from urllib.parse import quote, urlsplit

from btu.shared.messages import _

SIGNATURE_HEADER = "X-BTU-Webhook-Signature"
DEFAULT_PORTS = {"http": 80, "https": 443}
# A status line longer than this is no HTTP server's.
MAX_STATUS_LINE = 1024
STATUS_LINE = re.compile(rb"HTTP/1\.[01] (\d{3})")
# Characters a path or query keeps as they are; any other is percent-encoded.
URL_SAFE = "/%:@!$&'()*+,;=~-._?"


class WebhookError(Exception):
	"""Why a webhook was not delivered: a template marked for translation (`btu.shared.messages._`) and its values."""

	def __init__(self, template: str, /, **params) -> None:
		self.template = template
		self.params = params
		super().__init__(template.format(**params))


class WebhookRefused(WebhookError):
	"""The URL, or an address its host resolves to, is not one a webhook may post to."""


class DeliveryFailed(WebhookError):
	"""The POST was tried and failed: no connection, no answer within the deadline, not HTTP."""


@dataclass(frozen=True)
class Target:
	"""Where a webhook URL posts: its scheme, host (IDNA, no brackets), port and request path with its query."""

	scheme: str
	host: str
	port: int
	path: str

	@property
	def host_header(self) -> str:
		host = f"[{self.host}]" if ":" in self.host else self.host
		return host if self.port == DEFAULT_PORTS[self.scheme] else f"{host}:{self.port}"


def target(url: str) -> Target:
	"""`url` as a Target, or WebhookRefused: an http(s) URL with a host, no spaces, no user or password in it."""
	text = url.strip()
	try:
		parts = urlsplit(text)
		port = parts.port
		host = (parts.hostname or "").encode("idna").decode("ascii")
	except (ValueError, UnicodeError):
		raise WebhookRefused(_("{url} is not an http(s) URL with a host and a valid port"), url=text) from None
	if parts.scheme.lower() not in DEFAULT_PORTS or not host or any(c.isspace() for c in text):
		raise WebhookRefused(_("{url} is not an http(s) URL with a host"), url=text)
	if parts.username is not None or parts.password is not None:
		raise WebhookRefused(
			_("{url} holds a user or password; the receiver checks the {header} signature instead"),
			url=text,
			header=SIGNATURE_HEADER,
		)
	path = quote(parts.path or "/", safe=URL_SAFE) + (f"?{quote(parts.query, safe=URL_SAFE)}" if parts.query else "")
	scheme = parts.scheme.lower()
	return Target(scheme, host.lower(), port or DEFAULT_PORTS[scheme], path)


def internal_kind(address: str) -> str | None:
	"""What makes `address` one a webhook may not reach (loopback, private, ...), or None for a public address."""
	ip = ipaddress.ip_address(address.split("%", 1)[0])
	if ip.version == 6 and ip.ipv4_mapped is not None:
		ip = ip.ipv4_mapped  # ::ffff:127.0.0.1 reaches 127.0.0.1
	for kind, holds in (
		("loopback", ip.is_loopback),
		("link-local, where cloud metadata services answer", ip.is_link_local),
		("unspecified", ip.is_unspecified),
		("multicast", ip.is_multicast),
		("private", ip.is_private),
		("reserved", ip.is_reserved),
	):
		if holds:
			return kind
	return None if ip.is_global else "not globally routable"


def addresses(where: Target, allowed_hosts: Iterable[str], deadline: float) -> list[tuple]:
	"""(family, sockaddr) of every address `where`'s host resolves to, each checked; WebhookRefused names the first
	internal one (its host not in `allowed_hosts`), DeliveryFailed a host that does not resolve by `deadline`."""
	found = resolve(where.host, where.port, deadline)
	if where.host in {host.strip().lower() for host in allowed_hosts}:
		return found
	for _family, sockaddr in found:
		kind = internal_kind(sockaddr[0])
		if kind:
			raise WebhookRefused(
				_(
					"host {host} resolves to {address}, a {kind} address; a webhook posts to public addresses only "
					"(list the host in the site config's btu_webhook_allowed_hosts to allow it)"
				),
				host=where.host,
				address=sockaddr[0],
				kind=kind,
			)
	return found


def resolve(host: str, port: int, deadline: float) -> list[tuple]:
	"""getaddrinfo on a thread of its own: it has no timeout, and the resolver's may be many seconds."""
	result: dict = {}

	def lookup() -> None:
		try:
			result["found"] = [
				(info[0], info[4])
				for info in socket.getaddrinfo(host, port, type=socket.SOCK_STREAM, proto=socket.IPPROTO_TCP)
			]
		except (OSError, UnicodeError) as exc:
			result["error"] = exc

	thread = threading.Thread(target=lookup, name="btu-webhook-lookup", daemon=True)
	thread.start()
	thread.join(max(deadline - time.monotonic(), 0))
	if thread.is_alive():
		raise DeliveryFailed(_("host {host} did not resolve within the webhook's time limit"), host=host)
	if "error" in result or not result["found"]:
		raise DeliveryFailed(
			_("host {host} does not resolve ({error}); correct the URL"), host=host, error=result.get("error")
		)
	return result["found"]


def signature(secret: str, body: bytes) -> str:
	"""The SIGNATURE_HEADER value: base64 of HMAC-SHA256(secret, body), as Frappe's Webhook signs."""
	return base64.b64encode(hmac.new(secret.encode(), body, hashlib.sha256).digest()).decode("ascii")


def post(url: str, body: bytes, *, secret: str, allowed_hosts: Iterable[str] = (), timeout_secs: float) -> int:
	"""POST the JSON `body` to `url`, signed with `secret`, within `timeout_secs` in all; returns the HTTP status.
	Raises WebhookRefused (the URL or its addresses) or DeliveryFailed (anything else)."""
	deadline = time.monotonic() + timeout_secs
	where = target(url)
	found = addresses(where, allowed_hosts, deadline)
	headers = {
		"Host": where.host_header,
		"User-Agent": "BTU alerts",
		"Content-Type": "application/json",
		"Content-Length": str(len(body)),
		SIGNATURE_HEADER: signature(secret, body),
		"Connection": "close",
	}
	request = (
		f"POST {where.path} HTTP/1.1\r\n".encode("ascii")
		+ "".join(f"{k}: {v}\r\n" for k, v in headers.items()).encode("ascii")
		+ b"\r\n"
		+ body
	)
	try:
		with connect(where, found, deadline) as sock:
			sock.settimeout(left(deadline))
			sock.sendall(request)
			return status(sock, deadline)
	except TimeoutError:
		raise DeliveryFailed(
			_("{host} did not answer within {secs} s"), host=where.host_header, secs=timeout_secs
		) from None
	except ssl.SSLError as exc:
		raise DeliveryFailed(
			_("TLS with {host} failed ({error}); the server needs a certificate valid for that name"),
			host=where.host_header,
			error=exc,
		) from None
	except OSError as exc:
		raise DeliveryFailed(_("{host}: {error}"), host=where.host_header, error=exc) from None


def connect(where: Target, found: list[tuple], deadline: float) -> socket.socket:
	"""A connection to the first of the checked addresses that accepts one, with TLS for https."""
	error: OSError | None = None
	for family, sockaddr in found:
		sock = socket.socket(family, socket.SOCK_STREAM)
		try:
			sock.settimeout(left(deadline))
			sock.connect(sockaddr)
			if where.scheme == "https":
				# The handshake as a whole is bounded by the socket's timeout (CPython keeps one deadline for it).
				sock.settimeout(left(deadline))
				return ssl.create_default_context().wrap_socket(sock, server_hostname=where.host)
			return sock
		except OSError as exc:
			sock.close()
			if isinstance(exc, (TimeoutError, ssl.SSLError)):
				raise
			error = exc
	raise DeliveryFailed(
		_("no address of {host} accepts a connection on port {port} ({error})"),
		host=where.host,
		port=where.port,
		error=error,
	)


def status(sock: socket.socket, deadline: float) -> int:
	"""The response's status code, read from its status line, each read given only what is left of the deadline."""
	line = b""
	while b"\r\n" not in line and len(line) <= MAX_STATUS_LINE:
		sock.settimeout(left(deadline))
		chunk = sock.recv(MAX_STATUS_LINE)
		if not chunk:
			break
		line += chunk
	found = STATUS_LINE.match(line)
	if not found:
		raise DeliveryFailed(_("the answer is not HTTP/1.x (it starts {start!r})"), start=line[:40])
	return int(found.group(1))


def left(deadline: float) -> float:
	"""Seconds until `deadline`; past it, TimeoutError (reported as the whole exchange's time limit)."""
	remaining = deadline - time.monotonic()
	if remaining <= 0:
		raise TimeoutError("webhook deadline passed")
	return remaining
