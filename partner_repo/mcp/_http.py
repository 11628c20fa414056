"""Streamable HTTP at ``/mcp``, behind a bearer token wherever anyone but this machine could reach it.

Who may reach it is the policy's (:mod:`partner_repo.mcp._policy`): on a loopback host a token is optional,
and the SDK's DNS-rebinding protection (Host and Origin checked) keeps web pages off it; on any other host
the server refuses to start without one. With a token, every request must carry
``Authorization: Bearer <token>``, or it is answered 401 before it reaches the SDK. The token is compared in
constant time (as a digest, so not even its length shows in timing), and it is never logged or echoed: the
401 says only that a valid token is missing.

The SDK's app is stateless on the handshake-era leg (``stateless_http``): the tools never call back into the
client, so nothing is lost, and any number of server processes can sit behind one load balancer without
sticky sessions (the ``2026-07-28`` leg has no sessions at all).
"""

from __future__ import annotations

import hashlib
import hmac

from mcp.server.lowlevel import Server
from mcp.server.transport_security import DEFAULT_MAX_REQUEST_BODY_SIZE
from starlette.datastructures import Headers
from starlette.responses import JSONResponse
from starlette.types import ASGIApp, Receive, Scope, Send

PATH = "/mcp"
REALM = "partner-repo"


def _digest(value: bytes) -> bytes:
    return hashlib.sha256(value).digest()


class BearerToken:
    """ASGI middleware: a request without ``Authorization: Bearer <token>`` is answered 401."""

    def __init__(self, app: ASGIApp, token: str) -> None:
        self._app = app
        self._expected = _digest(token.encode("ascii"))

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":  # the lifespan events pass
            await self._app(scope, receive, send)
            return
        header = Headers(scope=scope).get("authorization")
        scheme, _, presented = (header or "").partition(" ")
        if scheme.lower() == "bearer" and hmac.compare_digest(
            _digest(presented.strip().encode("utf-8", "surrogateescape")), self._expected
        ):
            await self._app(scope, receive, send)
            return
        challenge = f'Bearer realm="{REALM}"' + ("" if header is None else ', error="invalid_token"')
        response = JSONResponse(
            {"error": "invalid_token", "error_description": "a valid bearer token is required"},
            status_code=401,
            headers={"WWW-Authenticate": challenge},
        )
        await response(scope, receive, send)


def http_app(server: Server[object], *, host: str, token: str | None, max_body_bytes: int) -> ASGIApp:
    """The server's ASGI app: streamable HTTP at :data:`PATH`, behind :class:`BearerToken` when a token
    is given. ``max_body_bytes`` bounds a request (the SDK answers 413 past it)."""
    app: ASGIApp = server.streamable_http_app(
        streamable_http_path=PATH,
        stateless_http=True,
        host=host,
        max_request_body_size=max(max_body_bytes, DEFAULT_MAX_REQUEST_BODY_SIZE),
    )
    return app if token is None else BearerToken(app, token)


__all__ = ["PATH", "BearerToken", "http_app"]
