"""What the MCP server admits: who may reach it, and how large a turn it takes.

Who (:func:`http_problem`): on a loopback host (``127.0.0.1``, ``::1``, ``localhost``) a bearer token is
optional; on any other host the server refuses to start without one (``--token``, or :data:`TOKEN_VARIABLE`
in the environment), and a token must be long enough and survive an HTTP header unchanged. How much
(:data:`DEFAULT_MAX_TURN_BYTES`): an agent's turn, not a document dump.

Nothing here needs the SDK, so the command checks its options before the extra is even looked for.
"""

from __future__ import annotations

import ipaddress
import string

TOKEN_VARIABLE = "PARTNER_REPO_MCP_TOKEN"
"""Where ``--transport http`` reads its bearer token when ``--token`` is not given."""
DEFAULT_MAX_TURN_BYTES = 1024 * 1024
"""The largest turn ``record_turn`` takes by default (BSON bytes of its messages): an agent's turn, not a
document dump (``--max-turn-bytes``, up to the library's own limit, ``MAX_MESSAGE_BYTES``)."""
MIN_TOKEN_LENGTH = 16
TOKEN_CHARACTERS = frozenset(string.ascii_letters + string.digits + "-._~+/=")
"""RFC 6750's ``token68``: what a bearer token may hold, so it survives an HTTP header unchanged."""
TOKEN_HINT = 'python -c "import secrets; print(secrets.token_urlsafe(32))"'


def is_loopback(host: str) -> bool:
    """Whether ``host`` names this machine only (a loopback address, or ``localhost``)."""
    if host.strip().lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip().strip("[]")).is_loopback
    except ValueError:
        return False  # a host name: it may resolve to anything


def token_problem(token: str) -> str | None:
    """Why ``token`` cannot be the server's bearer token, or None. Never quotes it."""
    if len(token) < MIN_TOKEN_LENGTH:
        return f"the bearer token must be at least {MIN_TOKEN_LENGTH} characters (make one with {TOKEN_HINT})"
    if not set(token) <= TOKEN_CHARACTERS:
        return "the bearer token may hold only letters, digits and - . _ ~ + / ="
    return None


def http_problem(host: str, token: str | None) -> str | None:
    """Why the server must not start on ``host`` with ``token`` (None: no token), or None."""
    if token is not None:
        return token_problem(token)
    if not is_loopback(host):
        return (
            f"--host {host} is reachable from other machines: give a bearer token (--token, or "
            f"{TOKEN_VARIABLE} in the environment; make one with {TOKEN_HINT})"
        )
    return None


__all__ = [
    "DEFAULT_MAX_TURN_BYTES",
    "TOKEN_VARIABLE",
    "http_problem",
    "is_loopback",
    "token_problem",
]
