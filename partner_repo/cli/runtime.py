"""What every command shares, below the root group and every subcommand: where to connect, running a command's
coroutine, and turning library errors into one line on stderr and an exit code.

Exit codes: 0 ok, 1 not found or invariant failures found, 2 usage (click's own) and unreachable server.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, TypeVar

import click

from partner_repo.database import MongoDatabase
from partner_repo.errors import ConnectionFailed, PartnerRepoError
from partner_repo.masking import scrub

T = TypeVar("T")

EXIT_OK = 0
EXIT_NOT_FOUND = 1
EXIT_USAGE = 2


@dataclass
class Connection:
    """Where commands connect: ``--uri``/``--db``, else ``MONGODB_URI``/``PARTNER_REPO_DB``, else memory."""

    uri: str | None
    db_name: str

    async def open(self) -> MongoDatabase:
        """Connect with the production options of :mod:`partner_repo.settings` (``PARTNER_REPO_*``)."""
        from partner_repo.settings import connect_from_settings, settings_for

        return await connect_from_settings(settings_for(self.uri, self.db_name))


def connection(ctx: click.Context) -> Connection:
    """The connection the root command resolved from its options and the environment."""
    obj: Any = ctx.find_root().obj
    assert isinstance(obj, Connection)
    return obj


def run_async(work: Callable[[], Awaitable[T]]) -> T:
    """Run a command's coroutine; library errors become one clear line and an exit code, not a traceback."""
    try:
        return asyncio.run(_call(work))
    except ConnectionFailed as exc:
        click.echo(f"error: {scrub(str(exc))}", err=True)
        raise SystemExit(EXIT_USAGE) from None
    except PartnerRepoError as exc:  # may quote the driver, hence the URI: scrubbed like every shown error
        click.echo(f"error: {scrub(str(exc))}", err=True)
        raise SystemExit(EXIT_NOT_FOUND) from None


async def _call(work: Callable[[], Awaitable[T]]) -> T:
    return await work()
