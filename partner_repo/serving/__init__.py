"""Who may reach a server of the library, shared by the MCP server and the console (``docs/mcp.md``,
``docs/console.md``): loopback by default, a token everywhere else (``_policy``), and the ``Host`` and
``Origin`` rules that keep other sites' pages off it (``_headers``).

Below both servers and free of any web framework: each server applies these rules with its own stack (the MCP
server hands them to the SDK's transport security; the console checks them in its middleware), so a command
checks its options before its extra is even looked for. Both run on uvicorn the same way
(:func:`serve_asgi`, loaded on first use: uvicorn comes with either extra).
"""

from typing import TYPE_CHECKING

from partner_repo.plugins import on_first_use
from partner_repo.serving._headers import LOOPBACK_HOSTS, LOOPBACK_ORIGINS, HeaderRules, matches
from partner_repo.serving._policy import (
    MIN_TOKEN_LENGTH,
    TOKEN_CHARACTERS,
    TOKEN_HINT,
    host_name,
    http_problem,
    is_loopback,
    token_problem,
)

if TYPE_CHECKING:
    from partner_repo.serving._uvicorn import GRACE_SECONDS, serve_asgi

__getattr__ = on_first_use(
    __name__,
    {"GRACE_SECONDS": "partner_repo.serving._uvicorn", "serve_asgi": "partner_repo.serving._uvicorn"},
)

__all__ = [
    "GRACE_SECONDS",
    "LOOPBACK_HOSTS",
    "LOOPBACK_ORIGINS",
    "MIN_TOKEN_LENGTH",
    "TOKEN_CHARACTERS",
    "TOKEN_HINT",
    "HeaderRules",
    "host_name",
    "http_problem",
    "is_loopback",
    "matches",
    "serve_asgi",
    "token_problem",
]
