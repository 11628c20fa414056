"""Who may reach a server of the library, shared by the MCP server and the console (``docs/mcp.md``,
``docs/console.md``): loopback by default, a token everywhere else (``_policy``), and the ``Host`` and
``Origin`` rules that keep other sites' pages off it (``_headers``).

Below both servers and free of any web framework: each server applies these rules with its own stack (the MCP
server hands them to the SDK's transport security; the console checks them in its middleware), so a command
checks its options before its extra is even looked for.
"""

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

__all__ = [
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
    "token_problem",
]
