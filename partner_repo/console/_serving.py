"""Running the console: uvicorn on a socket bound here, until the command's ``stop`` is set.

As the MCP server's HTTP transport: the socket is bound before uvicorn starts, so a port in use is one line
(:class:`InvalidInput`) and port 0 takes a free one, logged; uvicorn's own signal handlers are left out (the
command owns SIGINT and SIGTERM) and it logs through the command's logging (``log_config=None``: to stderr,
in the command's format, secrets masked). Its access lines name the method, path and status, never a form's
fields, so a token a browser posts to sign in never reaches a log.
"""

from __future__ import annotations

import asyncio
import contextlib
import socket
from collections.abc import Callable, Iterator

import uvicorn
from starlette.types import ASGIApp

from partner_repo.errors import InvalidInput
from partner_repo.mongo import library_logger

logger = library_logger("partner_repo.console")

GRACE_SECONDS = 5
"""How long a stopping console waits for the requests in flight."""


class _Uvicorn(uvicorn.Server):
    """uvicorn without its signal handlers: the command's ``stop`` ends it."""

    @contextlib.contextmanager
    def capture_signals(self) -> Iterator[None]:
        yield


async def serve_console(
    app: ASGIApp,
    stop: asyncio.Event,
    *,
    host: str,
    port: int,
    describe: str = "",
    on_bound: Callable[[int], None] | None = None,
) -> None:
    """Serve ``app`` at ``http://host:port/`` until ``stop`` is set; ``on_bound`` is told the port taken
    (port 0: a free one), and the log line names it with ``describe`` (read-only or not, token or not)."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    try:
        listener = socket.create_server((host.strip("[]"), port), family=family, backlog=2048)
    except OSError as exc:
        raise InvalidInput(f"cannot serve on {host} port {port}: {exc.strerror or exc}") from None
    config = uvicorn.Config(
        app, log_config=None, timeout_graceful_shutdown=GRACE_SECONDS, server_header=False
    )
    web = _Uvicorn(config)

    async def watch() -> None:
        await stop.wait()
        web.should_exit = True

    watcher = asyncio.create_task(watch())
    shown = f"[{host}]" if ":" in host else host
    bound = listener.getsockname()[1]
    logger.info("serving the console at http://%s:%d/%s", shown, bound, f" ({describe})" if describe else "")
    if on_bound is not None:
        on_bound(bound)
    try:
        with listener:
            await web.serve(sockets=[listener])
    finally:
        watcher.cancel()


__all__ = ["GRACE_SECONDS", "serve_console"]
