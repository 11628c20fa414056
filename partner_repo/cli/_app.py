"""The root command group: the options every command shares, and the registration of every subcommand.

Only this module imports the subcommands; they and it share their plumbing through
:mod:`partner_repo.cli._runtime`, so no subcommand imports this one.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from typing import Any

import click

from partner_repo import __version__
from partner_repo.cli._console import console_command
from partner_repo.cli._dead_letters import dead_letters
from partner_repo.cli._demo import demo
from partner_repo.cli._erasure import forget
from partner_repo.cli._listen import listen
from partner_repo.cli._listener_status import listener
from partner_repo.cli._logs import format_option, level_option
from partner_repo.cli._maintenance import check, import_state, repair
from partner_repo.cli._mcp import mcp_command
from partner_repo.cli._migrate import migrate
from partner_repo.cli._recall import recall
from partner_repo.cli._resummarize import resummarize
from partner_repo.cli._roll_idle import roll_idle
from partner_repo.cli._runtime import (
    EXIT_INTERRUPTED,
    EXIT_TERMINATED,
    EXIT_USAGE,
    interruptions,
    one_line_errors,
    undecodable_argument,
)
from partner_repo.cli._shared import remember_root, share_root_options
from partner_repo.cli._signals import exit_now
from partner_repo.cli._slices import slices, units


class RootGroup(click.Group):
    """The root group: whatever a command raises of the library's errors is one line, never a traceback (a
    bad setting may be read outside a command's coroutine); so is an argument that is no UTF-8 (exit 2) and
    Ctrl-C (exit 130, saying how far the command got)."""

    def main(self, args: Sequence[str] | None = None, *rest: Any, **options: Any) -> Any:
        arguments = list(sys.argv[1:] if args is None else args)
        if (problem := undecodable_argument(arguments)) is not None:
            click.echo(f"error: {problem}", err=True)
            sys.exit(EXIT_USAGE)
        return super().main(arguments, *rest, **options)

    def invoke(self, ctx: click.Context) -> object:
        with interruptions(ctx), one_line_errors():
            return super().invoke(ctx)


@click.group(
    cls=RootGroup, context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100}
)
@click.version_option(__version__, "--version", prog_name="partner-repo")
@click.option("--uri", default=None, help="MongoDB connection string [env: MONGODB_URI; default: in-memory].")
@click.option(
    "--db",
    "db_name",
    default=None,
    help="Database name [env: PARTNER_REPO_DB; default: the one the URI names (mongodb://HOST/NAME), "
    "else partner].",
)
@click.option(
    "--in-memory",
    is_flag=True,
    help="Use the embedded in-memory database, empty and gone at exit, on purpose (MONGODB_URI is ignored). "
    "Without it, commands that write or run until stopped refuse to run when no URI is set.",
)
@level_option
@format_option
@click.pass_context
def main(
    ctx: click.Context, uri: str | None, db_name: str | None, in_memory: bool, log_level: str, log_format: str
) -> None:
    """partner-repo: the memory of the Partner agent (cores, units, slices) in MongoDB.

    The options below may also follow the command (partner-repo slices list --uri URI); given there, they win.
    """
    remember_root(
        ctx, uri=uri, db_name=db_name, in_memory=in_memory, log_level=log_level, log_format=log_format
    )


for command in (
    check,
    console_command,
    dead_letters,
    demo,
    forget,
    import_state,
    listen,
    listener,
    mcp_command,
    migrate,
    recall,
    repair,
    resummarize,
    roll_idle,
    slices,
    units,
):
    main.add_command(command)
share_root_options(main)


def run() -> None:
    """The process's entry point (the ``partner-repo`` script and ``python -m partner_repo``): :func:`main`,
    except that a command ended by Ctrl-C or SIGTERM, once its cleanup ran and its one line was said, ends
    the process at once. Motor runs the driver in threads, and one blocked in server selection (up to its
    timeout) would otherwise hold the interpreter's exit; ``main`` itself stays a plain click group, so
    tests and applications that invoke it in process keep their process."""
    try:
        main.main()
    except SystemExit as exc:
        if exc.code in (EXIT_INTERRUPTED, EXIT_TERMINATED):
            exit_now(exc.code)
        raise
