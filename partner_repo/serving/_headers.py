"""The ``Host`` and ``Origin`` rules of a server the library runs: what keeps web pages of other sites off it.

DNS rebinding: a page of another site whose name is made to resolve to 127.0.0.1 reaches a loopback server
with its own name in ``Host``; a server that answers only the names it knows (:attr:`HeaderRules.hosts`)
answers it 421. Cross-site requests: a browser names the page's origin in ``Origin`` (on every POST, and on
every cross-origin fetch); a request whose origin is neither the server's own (the ``Host`` it was sent to,
whatever scheme a TLS-terminating proxy stripped) nor one it was told to answer is refused with 403. A request
without ``Origin`` (a plain client, a same-origin GET) passes this check.

Patterns are those of the MCP SDK's transport security, so the MCP server hands the same rules to the SDK: a
value matches a pattern that equals it, or a pattern ``base:*`` when it is ``base:`` and any port.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from urllib.parse import urlsplit

from partner_repo.serving._policy import is_loopback

LOOPBACK_HOSTS = ("127.0.0.1:*", "localhost:*", "[::1]:*")
"""The ``Host`` values a loopback server answers (any port): what a browser on this machine sends."""
LOOPBACK_ORIGINS = ("http://127.0.0.1:*", "http://localhost:*", "http://[::1]:*")
"""The origins of pages a loopback server serves to this machine's browser."""


def matches(value: str, patterns: Iterable[str]) -> bool:
    """Whether ``value`` is one of ``patterns`` (``base:*``: ``base`` with any port), case-insensitively."""
    value = value.strip().lower()
    for pattern in patterns:
        pattern = pattern.strip().lower()
        if value == pattern or (pattern.endswith(":*") and value.startswith(pattern[:-1])):
            return True
    return False


@dataclass(frozen=True)
class HeaderRules:
    """Which ``Host`` and ``Origin`` values a server answers.

    ``hosts``: the ``Host`` patterns answered, or None for any (a server beyond loopback, where its token
    guards it, as the MCP server's does). ``origins``: the origin patterns answered besides the server's own.
    """

    hosts: tuple[str, ...] | None
    origins: tuple[str, ...]

    @classmethod
    def for_host(cls, host: str, *, hosts: Iterable[str] = (), origins: Iterable[str] = ()) -> HeaderRules:
        """The rules of a server listening on ``host``: on loopback, the loopback names and ``host`` itself
        (on any port) and the names in ``hosts``; elsewhere, only ``hosts`` when given, else any. Origins:
        the loopback ones on loopback, and ``origins``."""
        named = tuple(pattern for name in hosts for pattern in _host_patterns(name))
        extra = tuple(origin.strip().rstrip("/") for origin in origins)
        if not is_loopback(host):
            return cls(hosts=named or None, origins=extra)
        own = _host_patterns(f"[{host.strip('[]')}]" if ":" in host else host)
        return cls(hosts=(*LOOPBACK_HOSTS, *own, *named), origins=(*LOOPBACK_ORIGINS, *extra))

    def host_allowed(self, host: str | None) -> bool:
        """Whether a request sent with this ``Host`` header is answered (a missing one never is, when the
        hosts are limited)."""
        if self.hosts is None:
            return True
        return bool(host) and matches(host or "", self.hosts)

    def origin_allowed(self, origin: str | None, host: str | None) -> bool:
        """Whether a request carrying this ``Origin`` header, sent to ``host``, is answered: none, the
        server's own origin, or one of :attr:`origins` (an opaque ``null`` origin never is)."""
        if origin is None or not origin.strip():
            return True
        parts = urlsplit(origin.strip())
        if parts.scheme not in ("http", "https") or not parts.netloc:
            return False
        if host and parts.netloc.lower() == host.strip().lower():
            return True
        return matches(origin.rstrip("/"), self.origins)


def _host_patterns(name: str) -> tuple[str, ...]:
    """``name`` as ``Host`` patterns: as given when it names a port; else the bare name (a browser leaves
    out the scheme's default port) and the name with any port (``name:*``)."""
    name = name.strip()
    has_port = name.rpartition("]")[2].startswith(":") if name.startswith("[") else name.count(":") == 1
    return (name,) if has_port else (name, f"{name}:*")


__all__ = ["LOOPBACK_HOSTS", "LOOPBACK_ORIGINS", "HeaderRules", "matches"]
