"""What the MCP server admits: who may reach it, and how large a turn it takes.

Who (:func:`http_problem`): the shared rules of :mod:`partner_repo.serving` (a token is optional on a
loopback host; on any other host the server refuses to start without one, read from ``--token`` or
:data:`TOKEN_VARIABLE`). How much (:data:`DEFAULT_MAX_TURN_BYTES`): an agent's turn, not a document dump.

Nothing here needs the SDK, so the command checks its options before the extra is even looked for.
"""

from __future__ import annotations

from partner_repo import serving
from partner_repo.serving import is_loopback

TOKEN_VARIABLE = "PARTNER_REPO_MCP_TOKEN"
"""Where ``--transport http`` reads its bearer token when ``--token`` is not given."""
DEFAULT_MAX_TURN_BYTES = 1024 * 1024
"""The largest turn ``record_turn`` takes by default (BSON bytes of its messages): an agent's turn, not a
document dump (``--max-turn-bytes``, up to the library's own limit, ``MAX_MESSAGE_BYTES``)."""


def http_problem(host: str, token: str | None) -> str | None:
    """Why the server must not start on ``host`` with ``token`` (None: no token), or None."""
    return serving.http_problem(host, token, variable=TOKEN_VARIABLE)


__all__ = [
    "DEFAULT_MAX_TURN_BYTES",
    "TOKEN_VARIABLE",
    "http_problem",
    "is_loopback",
]
