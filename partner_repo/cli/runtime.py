"""What every command shares, below the root group and every subcommand: where to connect, running a command's
coroutine, and turning library errors into one line on stderr and an exit code.

Exit codes: 0 ok, 1 not found or invariant failures found, 2 usage (click's own, an unusable option value or
setting) and an unreachable server. Every error but click's own usage errors is one line on stderr.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Callable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any, NoReturn, TypeVar

import click

from partner_repo.database import MongoDatabase
from partner_repo.errors import ConnectionFailed, InvalidInput, PartnerRepoError
from partner_repo.masking import scrub
from partner_repo.settings import database_name_problem, uri_problem

T = TypeVar("T")

EXIT_OK = 0
EXIT_NOT_FOUND = 1
EXIT_USAGE = 2


@dataclass
class Connection:
    """Where commands connect: ``--uri``/``--db``, else ``MONGODB_URI``/``PARTNER_REPO_DB``, else memory.

    ``uri_from`` names where the URI came from (``--uri`` or ``MONGODB_URI``), for errors about it.
    """

    uri: str | None
    db_name: str
    uri_from: str = "--uri"

    async def open(self) -> MongoDatabase:
        """Connect with the production options of :mod:`partner_repo.settings` (``PARTNER_REPO_*``)."""
        from partner_repo.settings import connect_from_settings, settings_for

        return await connect_from_settings(settings_for(self.uri, self.db_name))


def resolve_connection(uri: str | None, db_name: str | None, environ: Mapping[str, str]) -> Connection:
    """Where to connect from ``--uri``/``--db`` and the environment; an empty or blank value counts as not
    given, for options as for variables. An option that can never work is refused at once (:func:`fail`); a
    URI from the environment is checked by :func:`connection`, when a command needs it."""
    given_uri = (uri or "").strip() or None
    if given_uri is not None and (problem := uri_problem(given_uri)) is not None:
        fail(f"--uri: {problem}")
    if db_name and (problem := database_name_problem(db_name)) is not None:
        fail(f"--db: {problem}")
    return Connection(
        uri=given_uri or (environ.get("MONGODB_URI") or "").strip() or None,
        db_name=db_name or environ.get("PARTNER_REPO_DB") or "partner",
        uri_from="--uri" if given_uri else "MONGODB_URI",
    )


def connection(ctx: click.Context) -> Connection:
    """The connection the root command resolved, once its URI is known to be one."""
    obj: Any = ctx.find_root().obj
    assert isinstance(obj, Connection)
    if obj.uri is not None and (problem := uri_problem(obj.uri)) is not None:
        fail(f"{obj.uri_from}: {problem}")
    return obj


def fail(message: str) -> NoReturn:
    """End the command with ``error: message`` on stderr (one line) and the usage exit code."""
    click.echo(f"error: {message}", err=True)
    raise SystemExit(EXIT_USAGE)


@contextlib.contextmanager
def one_line_errors() -> Iterator[None]:
    """Library errors become one line on stderr and an exit code, not a traceback: 2 for what the operator
    must change (an unreachable server, a bad setting or value), 1 for the rest (not found, conflicts)."""
    try:
        yield
    except (ConnectionFailed, InvalidInput) as exc:
        fail(scrub(str(exc)))  # may quote the driver, hence the URI: scrubbed like every shown error
    except PartnerRepoError as exc:
        click.echo(f"error: {scrub(str(exc))}", err=True)
        raise SystemExit(EXIT_NOT_FOUND) from None


def run_async(work: Callable[[], Awaitable[T]]) -> T:
    """Run a command's coroutine; library errors become one clear line and an exit code, not a traceback."""
    with one_line_errors():
        return asyncio.run(_call(work))


async def _call(work: Callable[[], Awaitable[T]]) -> T:
    return await work()
