"""Running the server on a transport: stdio (one client, the process that started this one) or streamable
HTTP (any number, over uvicorn).

Over stdio the server ends when the client closes its end of the pipe, the one way to end it cleanly: the
SDK reads stdin in a worker thread that nothing but the end of the pipe finishes (the command ends the
process at once on SIGINT/SIGTERM). Over HTTP, ``stop`` (set by the command on SIGINT/SIGTERM) makes uvicorn
stop taking connections and finish the requests in flight (at most
:data:`partner_repo.serving.GRACE_SECONDS`). uvicorn's own
signal handling is left out: the command owns the signals, as ``listen`` does, and uvicorn would raise them
again once stopped. uvicorn logs through the command's logging (``log_config=None``): to stderr, in the
command's format, secrets masked.

Over HTTP the server answers at ``/mcp``, behind a bearer token wherever anyone but this machine could reach
it. Who may reach it is the shared policy's (:mod:`partner_repo.serving`): on a loopback host a token is
optional, and the Host and Origin rules (:class:`~partner_repo.serving.HeaderRules`, handed to the SDK's
DNS-rebinding protection) keep web pages off it; on any other host the server refuses to start without one.
With a token, every request must carry ``Authorization: Bearer <token>``, or it is answered 401 before it
reaches the SDK (:class:`BearerToken`). The token is compared in constant time (as a digest, so not even its
length shows in timing), and it is never logged or echoed: the 401 says only that a valid token is missing.
The SDK's app is stateless on the handshake-era leg (``stateless_http``): the tools never call back into the
client, so nothing is lost, and any number of server processes can sit behind one load balancer without sticky
sessions (the ``2026-07-28`` leg has no sessions at all).
"""

from __future__ import annotations

import asyncio
import hashlib
import hmac
from typing import Any

from mcp.server.lowlevel import Server
from mcp.server.stdio import stdio_server
from mcp.server.transport_security import DEFAULT_MAX_REQUEST_BODY_SIZE, TransportSecuritySettings
from starlette.datastructures import Headers
from starlette.responses import JSONResponse
from starlette.types import ASGIApp, Receive, Scope, Send

from partner_repo.mongo import library_logger
from partner_repo.serving import HeaderRules, serve_asgi

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
        transport_security=transport_security(host),
    )
    return app if token is None else BearerToken(app, token)


def transport_security(host: str) -> TransportSecuritySettings:
    """The SDK's DNS-rebinding protection with the shared Host and Origin rules: on a loopback host the
    loopback names and the host itself (any loopback address, where the SDK alone knows three); beyond it
    off, as the SDK has it, since the bearer token guards the server there."""
    rules = HeaderRules.for_host(host)
    if rules.hosts is None:
        return TransportSecuritySettings(enable_dns_rebinding_protection=False)
    return TransportSecuritySettings(
        enable_dns_rebinding_protection=True,
        allowed_hosts=list(rules.hosts),
        allowed_origins=list(rules.origins),
    )


logger = library_logger("partner_repo.mcp")


async def serve_stdio(server: Server[Any]) -> None:
    """Serve the client on this process's stdin and stdout until it closes stdin.

    While serving, the SDK points file descriptor 1 at stderr, so nothing a summarizer prints can break the
    protocol's stream."""
    async with stdio_server() as (read_stream, write_stream):
        logger.info("serving MCP on stdio; the client ends it by closing stdin")
        await server.run(read_stream, write_stream, server.create_initialization_options())


async def serve_http(
    server: Server[Any],
    stop: asyncio.Event,
    *,
    host: str,
    port: int,
    token: str | None,
    max_body_bytes: int,
) -> None:
    """Serve streamable HTTP at ``http://host:port/mcp`` until ``stop`` is set (port 0: any free port, the
    one taken is logged; a port in use is one line, :class:`InvalidInput`)."""
    app = http_app(server, host=host, token=token, max_body_bytes=max_body_bytes)
    guard = "bearer token required" if token is not None else "no token: loopback only"

    def serving(url: str) -> str:
        return f"serving MCP over streamable HTTP at {url}{PATH} ({guard})"

    await serve_asgi(app, stop, host=host, port=port, logger=logger, serving=serving)


__all__ = [
    "BearerToken",
    "PATH",
    "http_app",
    "serve_http",
    "serve_stdio",
    "transport_security",
]
