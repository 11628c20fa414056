"""``partner-repo migrate``: apply or revert the schema migrations that ship with the package (Beanie's
format, from the top-level ``migrations/`` of the source tree)."""

from __future__ import annotations

from pathlib import Path

import click

from partner_repo.cli._progress import progress_bar
from partner_repo.cli._runtime import connection, fail, run_async
from partner_repo.migrating import default_migrations_path, migration_status, run_migrations
from partner_repo.settings import settings_for


@click.command()
@click.option("--backward", is_flag=True, help="Revert applied migrations instead of applying pending ones.")
@click.option(
    "--distance",
    type=click.IntRange(min=0),
    default=None,
    help="How many migrations to run; 0 means all [default: all forward, 1 backward].",
)
@click.option(
    "--transaction/--no-transaction",
    default=False,
    help="Run each migration in one transaction, all or nothing: only for a small, quiet database on a "
    "replica set (MongoDB aborts a transaction after 60 s and on any concurrent write) [default: "
    "--no-transaction, which is accepted for compatibility].",
)
@click.option(
    "--path",
    type=click.Path(file_okay=False, path_type=Path),
    default=None,
    help="Migrations directory [default: the migrations that ship with partner-repo].",
)
@click.option("--status", is_flag=True, help="Only show which migrations are applied and which are pending.")
@click.pass_context
def migrate(
    ctx: click.Context,
    backward: bool,
    distance: int | None,
    transaction: bool,
    path: Path | None,
    status: bool,
) -> None:
    """Apply pending schema migrations (or revert with --backward), recorded in `migrations_log`.

    Indexes are not created on connect here: the migrations own them. By default no transaction is used:
    each write is guarded on its own, so services may keep writing and there is no time limit; a run that
    fails leaves the migration pending, and running it again continues where it stopped.
    """
    if path is not None and not path.is_dir():
        fail(f"--path: no migrations directory at {path}")  # a bad option value: usage, exit 2
    where = connection(ctx, "read" if status else "write")
    directory = path or default_migrations_path()

    async def work() -> None:
        settings = settings_for(where.uri, where.db_name)
        database = await where.open(create_indexes=False)
        click.echo(f"database {settings.db} at {settings.masked_uri}; migrations in {directory}")
        if status:
            state = await migration_status(database, directory)
            for name in state.names:
                click.echo(f"  {'applied' if name in state.applied else 'pending'}  {name}")
            click.echo(f"current: {state.current or '(none applied)'}")
            return
        with progress_bar("running migrations") as progress:
            run = await run_migrations(
                database,
                directory,
                backward=backward,
                distance=distance,
                use_transaction=transaction,
                progress=progress,
            )
        verb = "reverted" if backward else "applied"
        if not run.ran:
            click.echo(f"nothing to run; current: {run.after or '(none applied)'}")
            return
        for name in run.ran:
            click.echo(f"  {verb}  {name}")
        click.echo(f"current: {run.after or '(none applied)'}")

    run_async(work)
