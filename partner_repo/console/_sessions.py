"""The console's sessions: a token exchanged once for a signed cookie, and the CSRF token of each session.

A session is ``issued.nonce.signature``: when it was issued (Unix seconds), a random nonce, and an HMAC-SHA256
of both under the console's key. Nothing is stored server-side, so any number of console processes started
with the same token accept each other's sessions, and a restart keeps them. The key is derived from the token
(a new token ends every session); a console without a token (loopback only) has a random key of its process.
A session lasts :data:`SESSION_SECONDS`. The CSRF token of a session is another HMAC of its nonce: every form
that writes carries it, and a write whose form does not is refused. Comparisons are constant-time, and no
message here ever holds a token.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import secrets
import time
from collections.abc import Callable
from dataclasses import dataclass

COOKIE = "partner_repo_console"
SESSION_SECONDS = 12 * 3600
"""How long a session lasts: a working day; then the token is asked for again."""
CLOCK_SKEW_SECONDS = 60


def _b64(raw: bytes) -> str:
    return base64.urlsafe_b64encode(raw).rstrip(b"=").decode("ascii")


def _digest(value: str) -> bytes:
    return hashlib.sha256(value.encode("utf-8", "surrogateescape")).digest()


@dataclass(frozen=True)
class Session:
    """A verified session: its cookie value, its nonce and the CSRF token its forms carry."""

    value: str
    nonce: str
    csrf: str
    fresh: bool
    """Issued by this request (its cookie is to be set on the answer)."""


class SessionKeys:
    """Issues and verifies sessions, and checks the token they are exchanged for."""

    def __init__(self, token: str | None, *, clock: Callable[[], float] = time.time) -> None:
        self._token = None if token is None else _digest(token)
        seed = b"partner-repo console session\0" + (self._token or secrets.token_bytes(32))
        self._key = hashlib.sha256(seed).digest()
        self._clock = clock

    @property
    def token_required(self) -> bool:
        return self._token is not None

    def token_matches(self, presented: str) -> bool:
        """Whether ``presented`` is the console's token (compared as digests, in constant time)."""
        return self._token is not None and hmac.compare_digest(_digest(presented.strip()), self._token)

    def issue(self) -> Session:
        issued, nonce = str(int(self._clock())), secrets.token_urlsafe(18)
        value = f"{issued}.{nonce}.{self._sign(f'{issued}.{nonce}')}"
        return Session(value=value, nonce=nonce, csrf=self._csrf(nonce), fresh=True)

    def verify(self, value: str | None) -> Session | None:
        """The session a cookie holds, or None: unsigned, tampered with, expired or from the future."""
        if not value or value.count(".") != 2:
            return None
        issued, nonce, signature = value.split(".")
        if not hmac.compare_digest(self._sign(f"{issued}.{nonce}"), signature) or not issued.isdigit():
            return None
        age = self._clock() - int(issued)
        if age > SESSION_SECONDS or age < -CLOCK_SKEW_SECONDS:
            return None
        return Session(value=value, nonce=nonce, csrf=self._csrf(nonce), fresh=False)

    def csrf_matches(self, session: Session, presented: str | None) -> bool:
        return presented is not None and hmac.compare_digest(session.csrf, presented)

    def _sign(self, text: str) -> str:
        return _b64(hmac.new(self._key, text.encode("ascii", "replace"), hashlib.sha256).digest())

    def _csrf(self, nonce: str) -> str:
        return self._sign(f"csrf.{nonce}")


__all__ = ["COOKIE", "SESSION_SECONDS", "Session", "SessionKeys"]
