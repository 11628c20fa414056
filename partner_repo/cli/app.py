"""The root command group: the options every command shares, and the registration of every subcommand.

Only this module imports the subcommands; they and it share their plumbing through
:mod:`partner_repo.cli.runtime`, so no subcommand imports this one.
"""

from __future__ import annotations

import os

import click

from partner_repo import __version__
from partner_repo.cli.dead_letters import dead_letters
from partner_repo.cli.demo import demo
from partner_repo.cli.listen import listen
from partner_repo.cli.maintenance import check, import_state, repair
from partner_repo.cli.migrate import migrate
from partner_repo.cli.roll_idle import roll_idle
from partner_repo.cli.runtime import Connection
from partner_repo.cli.slices import slices, units


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


for command in (
    check,
    dead_letters,
    demo,
    import_state,
    listen,
    migrate,
    repair,
    roll_idle,
    slices,
    units,
):
    main.add_command(command)
