"""The root's options (``--uri``, ``--db``, ``--in-memory``, ``--log-level``, ``--log-format``) accepted after
the command too: ``partner-repo listen --consumer X --in-memory`` is ``partner-repo --in-memory listen
--consumer X``, and ``partner-repo slices --in-memory list`` is ``partner-repo --in-memory slices list``.

:func:`share_root_options` adds them to every group and command (hidden from their help: the root's help
lists them); what a group or command is given there is merged over what the root was given, level after level
(the later value wins, and a ``--uri`` replaces an earlier ``--in-memory`` as an ``--in-memory`` replaces an
earlier ``--uri``) before the command runs.
"""

from __future__ import annotations

import functools
import os
from collections.abc import Callable, Iterator
from typing import Any

import click
from click.core import ParameterSource

from partner_repo.cli._logs import FORMATS, LEVELS, configure_logging
from partner_repo.cli._runtime import LOG_FORMAT, resolve_connection

ROOT_VALUES = "partner_repo.root_options"
"""``ctx.meta`` key: what the root command was given (and its logging's undo)."""
GIVEN_AFTER = "partner_repo.options_after_the_command"
"""``ctx.meta`` key: the root options given after the root, by depth (1: after a group or a top command)."""
RESTORE_LOGGING = "partner_repo.restore_logging"
"""``ctx.meta`` key: undoes the logging the command configured, when it closes."""


def remember_root(
    ctx: click.Context,
    *,
    uri: str | None,
    db_name: str | None,
    in_memory: bool,
    log_level: str,
    log_format: str,
) -> None:
    """Resolve the root's connection and logging; keep its values for a command's options to merge over."""
    values = {
        "uri": uri,
        "db_name": db_name,
        "in_memory": in_memory,
        "log_level": log_level,
        "log_format": log_format,
    }
    ctx.meta[ROOT_VALUES] = values
    ctx.call_on_close(lambda: ctx.meta.pop(RESTORE_LOGGING, _nothing)())  # first: resolving may fail
    _apply(ctx, values, logging_changed=True)


def share_root_options(root: click.Group) -> None:
    """Add the root's options (hidden) to every group and command below ``root``; a command merges what it and
    the groups above it were given before it runs."""
    for command in _below(root):
        command.params.extend(_options())
        if not isinstance(command, click.Group) and command.callback is not None:
            command.callback = _merging(command.callback)


def _nothing() -> None:
    return None


def _below(group: click.Group) -> Iterator[click.Command]:
    for command in group.commands.values():
        yield command
        if isinstance(command, click.Group):
            yield from _below(command)


def _depth(ctx: click.Context) -> int:
    depth = 0
    while ctx.parent is not None:
        depth, ctx = depth + 1, ctx.parent
    return depth


def _options() -> list[click.Option]:
    def given(name: str) -> Callable[[click.Context, click.Parameter, Any], None]:
        def remember(ctx: click.Context, param: click.Parameter, value: Any) -> None:
            if param.name is not None and ctx.get_parameter_source(param.name) is ParameterSource.COMMANDLINE:
                ctx.meta.setdefault(GIVEN_AFTER, {}).setdefault(_depth(ctx), {})[name] = value

        return remember

    hidden: dict[str, Any] = {"hidden": True, "expose_value": False}
    return [
        click.Option(["--uri", "after_uri"], callback=given("uri"), **hidden),
        click.Option(["--db", "after_db"], callback=given("db_name"), **hidden),
        click.Option(["--in-memory", "after_in_memory"], is_flag=True, callback=given("in_memory"), **hidden),
        click.Option(
            ["--log-level", "after_log_level"],
            type=click.Choice(LEVELS, case_sensitive=False),
            callback=given("log_level"),
            **hidden,
        ),
        click.Option(
            ["--log-format", "after_log_format"],
            type=click.Choice(FORMATS, case_sensitive=False),
            callback=given("log_format"),
            **hidden,
        ),
    ]


def _merging(callback: Callable[..., Any]) -> Callable[..., Any]:
    @functools.wraps(callback)
    def merged(*args: Any, **kwargs: Any) -> Any:
        ctx = click.get_current_context()
        levels: dict[int, dict[str, Any]] = ctx.meta.pop(GIVEN_AFTER, {})
        if levels:
            root = ctx.find_root()
            values = dict(root.meta[ROOT_VALUES])
            for depth in sorted(levels):
                values = _over(values, levels[depth])
            logging_changed = any("log_level" in given or "log_format" in given for given in levels.values())
            _apply(root, values, logging_changed=logging_changed)
        return callback(*args, **kwargs)

    return merged


def _over(values: dict[str, Any], after: dict[str, Any]) -> dict[str, Any]:
    """``values`` with the options given ``after`` them: a ``--uri`` replaces an earlier ``--in-memory``, an
    ``--in-memory`` an earlier ``--uri``."""
    merged = {**values, **after}
    if "uri" in after and "in_memory" not in after:
        merged["in_memory"] = False
    if after.get("in_memory") and "uri" not in after:
        merged["uri"] = None
    return merged


def _apply(root: click.Context, values: dict[str, Any], *, logging_changed: bool) -> None:
    if logging_changed:
        root.meta.pop(RESTORE_LOGGING, _nothing)()
        root.meta[RESTORE_LOGGING] = configure_logging(values["log_level"], values["log_format"])
        root.meta[LOG_FORMAT] = values["log_format"].lower()
    root.obj = resolve_connection(values["uri"], values["db_name"], os.environ, in_memory=values["in_memory"])
    root.meta["explicit_uri"] = root.obj.uri if root.obj.uri_from == "--uri" else None
    root.meta["explicit_db"] = values["db_name"] or None
