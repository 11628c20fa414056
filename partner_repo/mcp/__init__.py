"""The memory as a Model Context Protocol server: ``partner-repo mcp`` (``docs/mcp.md``).

An agent host (an IDE assistant, a desktop chat client, an agent framework) reaches a core's memory through
five tools: ``record_turn``, ``recall``, ``context``, ``topics`` and ``forget``. :mod:`.tools` does what each
tool does with the library's services (no protocol in it); :mod:`.arguments` and :mod:`.results` are their
schemas; :mod:`.server` puts them on the official Python SDK's low-level ``Server``; :mod:`.http` serves it
over streamable HTTP behind a bearer token, :mod:`.serving` runs either transport.

Needs the SDK (``pip install 'partner-repo[mcp]'``); only this package imports it (an import contract keeps
it so), and this module does not: the command checks :func:`require_sdk` first, so an install without the
extra gets one line saying what to install. The package shares its name with the SDK's top-level ``mcp``:
every import here is absolute, so ``import mcp`` always means the SDK, never this package.
"""

from __future__ import annotations

import importlib

from partner_repo.errors import PartnerRepoError

INSTALL_HINT = "pip install 'partner-repo[mcp]'"
SDK_MODULES = ("mcp.server.lowlevel", "mcp.server.stdio", "uvicorn", "starlette.applications")
"""What serving needs: the SDK's server and stdio transport, and the HTTP stack it brings."""
TOKEN_VARIABLE = "PARTNER_REPO_MCP_TOKEN"
"""Where ``--transport http`` reads its bearer token when ``--token`` is not given."""
DEFAULT_MAX_TURN_BYTES = 1024 * 1024
"""The largest turn ``record_turn`` takes by default (BSON bytes of its messages): an agent's turn, not a
document dump (``--max-turn-bytes``, up to the library's own limit,
:data:`~partner_repo.storage.MAX_MESSAGE_BYTES`)."""


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


__all__ = ["DEFAULT_MAX_TURN_BYTES", "INSTALL_HINT", "TOKEN_VARIABLE", "McpUnavailable", "require_sdk"]
