"""Running an ASGI app with uvicorn on a socket bound here, until the command's ``stop`` is set: the MCP
server's HTTP transport and the console run this way.

The socket is bound before uvicorn starts, so a port in use is one line (:class:`InvalidInput`) and port 0
takes a free one, logged. uvicorn's own signal handlers are left out: the command owns SIGINT and SIGTERM
(uvicorn would raise them again once stopped), and ``stop`` makes it stop taking connections and finish the
requests in flight (at most :data:`GRACE_SECONDS`). It logs through the command's logging
(``log_config=None``: to stderr, in the command's format, secrets masked).

Imported only by a server that runs (the serving front loads it on first use): uvicorn is an extra.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import socket
from collections.abc import Callable, Iterator
from typing import Any

import uvicorn

from partner_repo.errors import InvalidInput

GRACE_SECONDS = 5
"""How long a stopping server waits for the requests in flight."""


class _Uvicorn(uvicorn.Server):
    """uvicorn without its signal handlers: the command's ``stop`` ends it."""

    @contextlib.contextmanager
    def capture_signals(self) -> Iterator[None]:
        yield


async def serve_asgi(
    app: Any,
    stop: asyncio.Event,
    *,
    host: str,
    port: int,
    logger: logging.Logger,
    serving: Callable[[str], str],
    on_bound: Callable[[int], None] | None = None,
) -> None:
    """Serve ``app`` on ``host``:``port`` until ``stop`` is set. Once bound, ``logger`` logs ``serving(url)``
    (``url`` is ``http://host:port``, with the port taken) and ``on_bound`` is told the port."""
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
    logger.info("%s", serving(f"http://{shown}:{bound}"))
    if on_bound is not None:
        on_bound(bound)
    try:
        with listener:
            await web.serve(sockets=[listener])
    finally:
        watcher.cancel()


__all__ = ["GRACE_SECONDS", "serve_asgi"]
