"""The root command group and the options every command shares (connection, output format).

Exit codes: 0 ok, 1 not found or invariant failures found, 2 usage (click's own) and unreachable server.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, TypeVar

import click

from partner_repo import __version__
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


@click.group(context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100})
@click.version_option(__version__, "--version", prog_name="partner-repo")
@click.option("--uri", default=None, help="MongoDB connection string [env: MONGODB_URI; default: in-memory].")
@click.option("--db", "db_name", default=None, help="Database name [env: PARTNER_REPO_DB; default: partner].")
@click.pass_context
def main(ctx: click.Context, uri: str | None, db_name: str | None) -> None:
    """partner-repo: the memory of the Partner agent (cores, units, slices) in MongoDB."""
    ctx.obj = Connection(
        uri=uri if uri is not None else os.environ.get("MONGODB_URI") or None,
        db_name=db_name or os.environ.get("PARTNER_REPO_DB") or "partner",
    )
    ctx.meta["explicit_uri"] = uri
    ctx.meta["explicit_db"] = db_name


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


def connection(ctx: click.Context) -> Connection:
    obj: Any = ctx.find_root().obj
    assert isinstance(obj, Connection)
    return obj


def _register_commands() -> None:
    from partner_repo.cli import demo

    main.add_command(demo.demo)
    from partner_repo.cli.roll_idle import roll_idle

    main.add_command(roll_idle)
    from partner_repo.cli.migrate import migrate

    main.add_command(migrate)
    from partner_repo.cli.slices import slices, units

    main.add_command(slices)
    main.add_command(units)
    from partner_repo.cli.maintenance import check, import_state, repair

    main.add_command(check)
    main.add_command(repair)
    main.add_command(import_state)
    from partner_repo.cli.listen import listen

    main.add_command(listen)
    from partner_repo.cli.dead_letters import dead_letters

    main.add_command(dead_letters)
    from partner_repo.cli.listener_status import listener

    main.add_command(listener)


_register_commands()
