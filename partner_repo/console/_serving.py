"""Running the console: uvicorn on a socket bound first, until the command's ``stop`` is set, as the MCP
server's HTTP transport runs (:func:`partner_repo.serving.serve_asgi`: a port in use is one line, port 0
takes a free one, the command owns the signals, uvicorn logs through the command's logging). Its access
lines name the method, path and status, never a form's fields, so a token a browser posts to sign in never
reaches a log.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable

from starlette.types import ASGIApp

from partner_repo.mongo import library_logger
from partner_repo.serving import serve_asgi

logger = library_logger("partner_repo.console")


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

    def serving(url: str) -> str:
        return f"serving the console at {url}/" + (f" ({describe})" if describe else "")

    await serve_asgi(app, stop, host=host, port=port, logger=logger, serving=serving, on_bound=on_bound)


__all__ = ["serve_console"]
