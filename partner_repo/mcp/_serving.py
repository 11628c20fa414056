"""Running the server on a transport: stdio (one client, the process that started this one) or streamable
HTTP (any number, over uvicorn).

Over stdio the server ends when the client closes its end of the pipe, the one way to end it cleanly: the
SDK reads stdin in a worker thread that nothing but the end of the pipe finishes (the command ends the
process at once on SIGINT/SIGTERM). Over HTTP, ``stop`` (set by the command on SIGINT/SIGTERM) makes uvicorn
stop taking connections and finish the requests in flight (at most :data:`GRACE_SECONDS`). uvicorn's own
signal handling is left out: the command owns the signals, as ``listen`` does, and uvicorn would raise them
again once stopped. uvicorn logs through the command's logging (``log_config=None``): to stderr, in the
command's format, secrets masked.
"""

from __future__ import annotations

import asyncio
import contextlib
import socket
from collections.abc import Iterator
from typing import Any

import uvicorn
from mcp.server.lowlevel import Server
from mcp.server.stdio import stdio_server

from partner_repo.errors import InvalidInput
from partner_repo.mcp._http import PATH, http_app
from partner_repo.mongo import library_logger

logger = library_logger("partner_repo.mcp")

GRACE_SECONDS = 5
"""How long a stopping HTTP server waits for the requests in flight."""


async def serve_stdio(server: Server[Any]) -> None:
    """Serve the client on this process's stdin and stdout until it closes stdin.

    While serving, the SDK points file descriptor 1 at stderr, so nothing a summarizer prints can break the
    protocol's stream."""
    async with stdio_server() as (read_stream, write_stream):
        logger.info("serving MCP on stdio; the client ends it by closing stdin")
        await server.run(read_stream, write_stream, server.create_initialization_options())


class _Uvicorn(uvicorn.Server):
    """uvicorn without its signal handlers: the command's ``stop`` ends it."""

    @contextlib.contextmanager
    def capture_signals(self) -> Iterator[None]:
        yield


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
    one taken is logged). The socket is bound here, so a port in use is one line (:class:`InvalidInput`),
    not uvicorn's exit."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    try:
        listener = socket.create_server((host.strip("[]"), port), family=family, backlog=2048)
    except OSError as exc:
        raise InvalidInput(f"cannot serve on {host} port {port}: {exc.strerror or exc}") from None
    app = http_app(server, host=host, token=token, max_body_bytes=max_body_bytes)
    config = uvicorn.Config(
        app, log_config=None, timeout_graceful_shutdown=GRACE_SECONDS, server_header=False
    )
    web = _Uvicorn(config)

    async def watch() -> None:
        await stop.wait()
        web.should_exit = True

    watcher = asyncio.create_task(watch())
    shown = f"[{host}]" if ":" in host else host
    guard = "bearer token required" if token is not None else "no token: loopback only"
    bound = listener.getsockname()[1]
    logger.info("serving MCP over streamable HTTP at http://%s:%d%s (%s)", shown, bound, PATH, guard)
    try:
        with listener:
            await web.serve(sockets=[listener])
    finally:
        watcher.cancel()


__all__ = ["GRACE_SECONDS", "serve_http", "serve_stdio"]
