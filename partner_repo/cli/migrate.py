"""``partner-repo migrate``: apply or revert the schema migrations in ``migrations/`` (Beanie's format)."""

from __future__ import annotations

from pathlib import Path

import click

from partner_repo.cli.app import connection, run_async
from partner_repo.migration_runner import default_migrations_path, migration_status, run_migrations
from partner_repo.settings import connect_from_settings, settings_for


@click.command()
@click.option("--backward", is_flag=True, help="Revert applied migrations instead of applying pending ones.")
@click.option(
    "--distance",
    type=click.IntRange(min=0),
    default=None,
    help="How many migrations to run; 0 means all [default: all forward, 1 backward].",
)
@click.option(
    "--no-transaction",
    is_flag=True,
    help="Run each migration without a transaction (needed on a standalone server and in memory).",
)
@click.option(
    "--path",
    type=click.Path(file_okay=False, path_type=Path),
    default=None,
    help="Migrations directory [default: migrations/ of this checkout, else ./migrations].",
)
@click.option("--status", is_flag=True, help="Only show which migrations are applied and which are pending.")
@click.pass_context
def migrate(
    ctx: click.Context,
    backward: bool,
    distance: int | None,
    no_transaction: bool,
    path: Path | None,
    status: bool,
) -> None:
    """Apply pending schema migrations (or revert with --backward), recorded in `migrations_log`.

    Indexes are not created on connect here: the migrations own them. Each migration runs in a transaction
    (a replica set or sharded cluster is needed) unless --no-transaction is given; the shipped migrations
    are idempotent and guard every write, so running them without one is safe.
    """
    where = connection(ctx)
    directory = path or default_migrations_path()

    async def work() -> None:
        settings = settings_for(where.uri, where.db_name)
        database = await connect_from_settings(settings, create_indexes=False)
        click.echo(f"database {settings.db} at {settings.masked_uri}; migrations in {directory}")
        if status:
            state = await migration_status(database, directory)
            for name in state.names:
                click.echo(f"  {'applied' if name in state.applied else 'pending'}  {name}")
            click.echo(f"current: {state.current or '(none applied)'}")
            return
        run = await run_migrations(
            database, directory, backward=backward, distance=distance, use_transaction=not no_transaction
        )
        verb = "reverted" if backward else "applied"
        if not run.ran:
            click.echo(f"nothing to run; current: {run.after or '(none applied)'}")
            return
        for name in run.ran:
            click.echo(f"  {verb}  {name}")
        click.echo(f"current: {run.after or '(none applied)'}")

    run_async(work)
