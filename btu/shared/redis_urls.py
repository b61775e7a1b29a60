"""Redis URLs: which ones BTU takes, and how one is shown without its password."""

from __future__ import annotations

import re
from urllib.parse import parse_qsl, urlencode

# What redis-py's from_url connects to: TCP, TLS, a Unix socket.
REDIS_URL_SCHEMES = ("redis", "rediss", "unix")
MASK = "***"
URL_IN_TEXT = re.compile(r"[A-Za-z][A-Za-z0-9+.-]*://[^\s'\"<>]+")


def mask_url(text: str) -> str:
	"""`text` with the password of every URL in it (userinfo or ?password=) replaced by ***.

	A text without "://" is taken as one URL without its scheme ("user:pw@host:port").
	Every place that shows or logs a Redis URL, or a message that may hold one, passes it here."""
	if "://" not in text:
		return _mask_one(text)
	return URL_IN_TEXT.sub(lambda found: _mask_one(found.group()), text)


def _mask_one(url: str) -> str:
	scheme, separator, rest = url.partition("://")
	if not separator:
		scheme, rest = "", url
	main, question, query = rest.partition("?")
	netloc, slash, path = main.partition("/")
	if "@" in netloc:
		userinfo, _, hostport = netloc.rpartition("@")
		user, colon, _password = userinfo.partition(":")
		netloc = f"{user}:{MASK}@{hostport}" if colon else f"{userinfo}@{hostport}"
	if query:
		pairs = parse_qsl(query, keep_blank_values=True)
		query = urlencode([(k, MASK if k.lower() == "password" else v) for k, v in pairs], safe="*")
	return f"{scheme}{separator}{netloc}{slash}{path}{question}{query}"


def is_redis_url(text: str) -> bool:
	"""True when `text` starts with a scheme of REDIS_URL_SCHEMES and "://" (any case, spaces around ignored)."""
	scheme, separator, _ = text.strip().partition("://")
	return bool(separator) and scheme.lower() in REDIS_URL_SCHEMES


def redis_address(redis_conn) -> str:
	"""Where a client connects, without its password: "unix:///run/redis.sock", "127.0.0.1:6379/0", or for a
	Sentinel client the master it last found: "10.0.0.2:6379/0 (sentinel service mymaster)"; asks no server."""
	pool = redis_conn.connection_pool
	kwargs = pool.connection_kwargs
	service = getattr(pool, "service_name", None)
	if service is not None:
		master = getattr(pool, "master_address", None)
		found = f"{master[0]}:{master[1]}/{kwargs.get('db', 0)}" if master else "master not found yet"
		return f"{found} (sentinel service {service})"
	if kwargs.get("path"):
		return f"unix://{kwargs['path']}"
	return f"{kwargs.get('host', '?')}:{kwargs.get('port', '?')}/{kwargs.get('db', 0)}"
