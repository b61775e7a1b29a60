"""Redis refusing a user: telling a refusal (NOPERM, WRONGPASS, NOAUTH) from an outage, and saying which grant fixes
it. Both halves use it: the Desk's calls, the scheduler's threads and the `btu-scheduler` CLI."""

from __future__ import annotations

from redis import exceptions as redis_errors

ACL_FIX = "see btu-scheduler setup redis-acl"
# How Redis words a refusal, for the errors redis-py does not give a class of their own: a
# NOPERM inside a Lua script is a plain ResponseError, and older redis-py name fewer classes.
DENIED_MARKERS = ("NOPERM", "no permissions to", "The user executing the script can't", "WRONGPASS", "NOAUTH")
AUTH_ERRORS = tuple(
	getattr(redis_errors, name)
	for name in ("AuthenticationError", "AuthenticationWrongNumberOfArgsError")
	if hasattr(redis_errors, name)
)


def is_denied(exc: BaseException) -> bool:
	"""True when Redis refused the connection's user (NOPERM, WRONGPASS, NOAUTH), not when it is down."""
	if isinstance(exc, (getattr(redis_errors, "NoPermissionError", ()), *AUTH_ERRORS)):
		return True
	return isinstance(exc, redis_errors.RedisError) and any(marker in str(exc) for marker in DENIED_MARKERS)


def is_auth_failure(exc: BaseException) -> bool:
	"""True when Redis refused the user's name or password (rather than one grant)."""
	text = str(exc)
	return isinstance(exc, AUTH_ERRORS) or "WRONGPASS" in text or "NOAUTH" in text


def redis_user(redis_conn) -> str:
	"""The ACL user a client logs in as ("default" without a username)."""
	return redis_conn.connection_pool.connection_kwargs.get("username") or "default"


def denied_message(exc: BaseException, user: str, grant: str) -> str:
	"""One line for a refusal: which user, which grant (or its password), and the fix."""
	if is_auth_failure(exc):
		return (
			f"permission denied by Redis: user {user!r} cannot log in ({exc}); check its password "
			f"(rq_username/rq_password in common_site_config.json, or the URL); {ACL_FIX}"
		)
	return f"permission denied by Redis: user {user!r} lacks the grant {grant} ({exc}); {ACL_FIX}"
