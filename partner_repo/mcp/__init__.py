"""The memory as a Model Context Protocol server: ``partner-repo mcp`` (``docs/mcp.md``).

An agent host (an IDE assistant, a desktop chat client, an agent framework) reaches a core's memory through
five tools: ``record_turn``, ``recall``, ``context``, ``topics`` and ``forget``. ``_tools`` does what each
tool does with the library's services (no protocol in it); ``_arguments`` and ``_results`` are their schemas,
``_catalog`` lists them; ``_server`` puts them on the official Python SDK's low-level ``Server``;
``_serving`` runs it over stdio or over streamable HTTP behind a bearer token.

Needs the SDK (``pip install 'partner-repo[mcp]'``); only this package imports it (an import contract keeps it
so), and this module does not: the command checks :func:`require_sdk` first, so an install without the extra
gets one line saying what to install; who may reach the server and how large a turn it takes (``_policy``,
over the rules :mod:`partner_repo.serving` shares with the console) needs no SDK. What needs the SDK
(:func:`memory_server`, :func:`serve_stdio`, :func:`serve_http`) is loaded from this module on first use,
never on import. The package shares its name with the SDK's top-level ``mcp``: every import here is absolute,
so ``import mcp`` always means the SDK, never this package.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING

from partner_repo.errors import PartnerRepoError
from partner_repo.mcp._policy import DEFAULT_MAX_TURN_BYTES, TOKEN_VARIABLE, http_problem, is_loopback
from partner_repo.plugins import on_first_use

if TYPE_CHECKING:  # the real types for the checker; at run time they load on first use (__getattr__)
    from partner_repo.mcp._server import memory_server
    from partner_repo.mcp._serving import serve_http, serve_stdio
    from partner_repo.mcp._tools import MemoryTools

INSTALL_HINT = "pip install 'partner-repo[mcp]'"
SDK_MODULES = ("mcp.server.lowlevel", "mcp.server.stdio", "uvicorn", "starlette.applications")
"""What serving needs: the SDK's server and stdio transport, and the HTTP stack it brings."""


class McpUnavailable(PartnerRepoError, ImportError):
    """The ``mcp`` extra (the official MCP Python SDK) is not installed."""


def require_sdk() -> None:
    """Import what serving needs, or raise :class:`McpUnavailable` saying which extra to install."""
    for name in SDK_MODULES:
        try:
            importlib.import_module(name)
        except ImportError:
            raise McpUnavailable(
                f"partner-repo mcp needs the MCP Python SDK ({name} cannot be imported): {INSTALL_HINT}"
            ) from None


_ON_FIRST_USE = {
    "MemoryTools": "partner_repo.mcp._tools",
    "memory_server": "partner_repo.mcp._server",
    "serve_http": "partner_repo.mcp._serving",
    "serve_stdio": "partner_repo.mcp._serving",
}
"""The names that bring the SDK (or the whole library) with them, and the module each is loaded from."""

__getattr__ = on_first_use(__name__, _ON_FIRST_USE)


__all__ = [
    "DEFAULT_MAX_TURN_BYTES",
    "INSTALL_HINT",
    "TOKEN_VARIABLE",
    "McpUnavailable",
    "MemoryTools",
    "http_problem",
    "is_loopback",
    "memory_server",
    "require_sdk",
    "serve_http",
    "serve_stdio",
]
