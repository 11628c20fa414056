"""Parsing ``partner-repo`` command lines found in docs and config files, without running them."""

from __future__ import annotations

import click

from partner_repo.cli import main


def parse_cli(arguments: list[str]) -> click.Context:
    """Parse a ``partner-repo`` command line as click would (options, arguments, subcommands), not run it.

    Raises click's ``UsageError`` for an unknown command or option, a missing argument or a bad value.
    """
    ctx = main.make_context("partner-repo", list(arguments))
    command: click.Command = main
    while isinstance(command, click.Group):
        rest = [*getattr(ctx, "_protected_args", []), *ctx.args]
        if not rest:
            break
        name, sub, rest = command.resolve_command(ctx, rest)
        assert name is not None and sub is not None, arguments
        ctx = sub.make_context(name, rest, parent=ctx)
        command = sub
    return ctx
