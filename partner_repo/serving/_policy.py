"""Who may reach a server of the library (``partner-repo mcp --transport http``, ``partner-repo console``).

On a loopback host (``127.0.0.1``, ``::1``, ``localhost``) a token is optional: only this machine reaches it.
Anywhere else, or where the server is told to answer a name other machines use (a reverse proxy's), it
refuses to start without one, and a token must be long enough and survive an HTTP header unchanged. The
messages never quote a token.

Nothing here needs a web framework, so a command checks its options before its extra is even looked for.
"""

from __future__ import annotations

import ipaddress
import string
from collections.abc import Iterable
from urllib.parse import urlsplit

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


def host_name(value: str) -> str:
    """The host part of a ``Host`` header value or an origin (``https://name:443``, ``name:8080``,
    ``[::1]:80``), without its port."""
    value = value.strip()
    if "://" in value:
        return urlsplit(value).hostname or ""
    if value.startswith("["):
        return value[1:].partition("]")[0]
    return value.rpartition(":")[0] if value.count(":") == 1 else value


def token_problem(token: str) -> str | None:
    """Why ``token`` cannot be the server's token, or None. Never quotes it."""
    if len(token) < MIN_TOKEN_LENGTH:
        return f"the bearer token must be at least {MIN_TOKEN_LENGTH} characters (make one with {TOKEN_HINT})"
    if not set(token) <= TOKEN_CHARACTERS:
        return "the bearer token may hold only letters, digits and - . _ ~ + / ="
    return None


def http_problem(host: str, token: str | None, *, variable: str, answers: Iterable[str] = ()) -> str | None:
    """Why a server must not start on ``host`` with ``token`` (None: no token), or None.

    ``variable`` is the environment variable the command reads its token from (named in the message);
    ``answers`` are the other names (``Host`` values, origins) it is told to answer: one that is not
    loopback means other machines reach it, through a proxy, so it needs a token as well."""
    if token is not None:
        return token_problem(token)
    if not is_loopback(host):
        return (
            f"--host {host} is reachable from other machines: give a bearer token (--token, or "
            f"{variable} in the environment; make one with {TOKEN_HINT})"
        )
    for name in answers:
        if not is_loopback(host_name(name)):
            return (
                f"{name} is a name other machines reach this server by: give a bearer token (--token, or "
                f"{variable} in the environment; make one with {TOKEN_HINT})"
            )
    return None


__all__ = [
    "MIN_TOKEN_LENGTH",
    "TOKEN_CHARACTERS",
    "TOKEN_HINT",
    "host_name",
    "http_problem",
    "is_loopback",
    "token_problem",
]
