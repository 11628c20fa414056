"""The operator's console: a core's memory, recall, listener groups and the check, in a browser
(``partner-repo console``, ``docs/console.md``).

Server-rendered pages (Starlette, Jinja2 templates shipped with the package, a little plain JavaScript, no
build step) over the library's own services: ``_reads`` is what each page shows, ``_writes`` the writes
``--allow-writes`` offers (each through the service that owns it), ``_timeline`` and ``_history`` the pictures
(pure geometry), ``_sessions`` and ``_security`` who may reach it (the rules of :mod:`partner_repo.serving`,
shared with the MCP server), ``_app`` the routes and ``_serving`` uvicorn under the command's signals.

Needs the ``console`` extra (``pip install 'partner-repo[console]'``); only this package imports its web stack
(an import contract keeps it so), and this module does not: the command checks :func:`require_extra` first,
so an install without the extra gets one line saying what to install. What needs the extra
(:func:`console_app`, :func:`serve_console`) loads on first use, never on import.
"""

from __future__ import annotations

import importlib
from collections.abc import Iterable
from typing import TYPE_CHECKING

from partner_repo import serving
from partner_repo.console._options import DEFAULT_LAG_SAMPLE_SECONDS, DEFAULT_PORT, ConsoleOptions
from partner_repo.errors import PartnerRepoError
from partner_repo.plugins import on_first_use

if TYPE_CHECKING:  # the real types for the checker; at run time they load on first use (__getattr__)
    from partner_repo.console._app import console_app
    from partner_repo.console._reads import ConsoleReads
    from partner_repo.console._serving import serve_console
    from partner_repo.console._writes import ConsoleWrites, WritesOff

INSTALL_HINT = "pip install 'partner-repo[console]'"
TOKEN_VARIABLE = "PARTNER_REPO_CONSOLE_TOKEN"
"""Where ``partner-repo console`` reads its token when ``--token`` is not given."""
EXTRA_MODULES = ("starlette.applications", "jinja2", "uvicorn", "python_multipart")
"""What serving the console needs: the web framework, the templates, the server and form parsing."""


class ConsoleUnavailable(PartnerRepoError, ImportError):
    """The ``console`` extra (Starlette, Jinja2, uvicorn) is not installed."""


def require_extra() -> None:
    """Import what the console needs, or raise :class:`ConsoleUnavailable` saying which extra to install."""
    for name in EXTRA_MODULES:
        try:
            importlib.import_module(name)
        except ImportError:
            raise ConsoleUnavailable(
                f"partner-repo console needs its web stack ({name} cannot be imported): {INSTALL_HINT}"
            ) from None


def http_problem(host: str, token: str | None, answers: Iterable[str] = ()) -> str | None:
    """Why a console must not start on ``host`` with ``token`` (None: no token) answering the extra names
    ``answers`` (hosts and origins a proxy reaches it by), or None: the MCP server's rules."""
    return serving.http_problem(host, token, variable=TOKEN_VARIABLE, answers=answers)


_ON_FIRST_USE = {
    "ConsoleReads": "partner_repo.console._reads",
    "ConsoleWrites": "partner_repo.console._writes",
    "WritesOff": "partner_repo.console._writes",
    "console_app": "partner_repo.console._app",
    "serve_console": "partner_repo.console._serving",
}
"""The names that bring the web stack (or the whole library) with them, and the module each is loaded from."""

__getattr__ = on_first_use(__name__, _ON_FIRST_USE)


__all__ = [
    "DEFAULT_LAG_SAMPLE_SECONDS",
    "DEFAULT_PORT",
    "INSTALL_HINT",
    "TOKEN_VARIABLE",
    "ConsoleOptions",
    "ConsoleReads",
    "ConsoleUnavailable",
    "ConsoleWrites",
    "WritesOff",
    "console_app",
    "http_problem",
    "require_extra",
    "serve_console",
]
