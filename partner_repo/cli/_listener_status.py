"""``partner-repo listener status``: where every listener group stands, read from the database.

Works from any process (nothing needs to listen here): see :mod:`partner_repo.listener.state._status` for what
each figure means. Exit 1 when ``--group`` names a group that was never started.
"""

from __future__ import annotations

from dataclasses import asdict
from typing import Any

import click
from rich.table import Table

from partner_repo.cli._output import console, echo_json, fields, json_option, when
from partner_repo.cli._runtime import EXIT_NOT_FOUND, connection, run_async, say_error
from partner_repo.clock import utc_now
from partner_repo.listener.state import GroupStatus, listener_status


@click.group("listener")
def listener() -> None:
    """Listener groups: their lease, source, position and backlog."""


@listener.command("status")
@click.option("--group", default=None, help="Only this listener group [default: every group].")
@json_option
@click.pass_context
def status(ctx: click.Context, group: str | None, as_json: bool) -> None:
    """Where each group stands: owner and heartbeat, source, resume position age.

    Per consumer: its concurrency, slices pending (estimated from the checkpoints) and dead letters.
    """
    target = connection(ctx, "read")

    async def work() -> list[GroupStatus]:
        return await listener_status(await target.open(), group)

    groups = run_async(work)
    if group is not None and not groups:
        say_error(f"no listener group {group!r}")
        raise SystemExit(EXIT_NOT_FOUND)
    if as_json:
        echo_json([as_document(g) for g in groups])
        return
    if not groups:
        click.echo("no listener groups")
        return
    out = console()
    for table in _tables(groups):
        out.print(table)


def as_document(group: GroupStatus) -> dict[str, Any]:
    """The JSON form: the status's fields, plus ages in seconds at the time of the command."""
    now = utc_now()
    document = asdict(group)
    document["active"] = group.owner is not None
    document["heartbeat_age_s"] = group.age(group.heartbeat_at, now)
    document["position_age_s"] = group.age(group.position_at, now)
    return document


def _tables(groups: list[GroupStatus]) -> list[Table]:
    """Per group: its figures as names and values, then a table of its consumers (readable at 80 columns)."""
    now = utc_now()
    tables: list[Table] = []
    for group in groups:
        tables.append(
            fields(
                ("group", group.group),
                ("owner", group.owner or "none (not running)"),
                ("heartbeat", _ago(group.age(group.heartbeat_at, now))),
                ("source", (group.source or "-").replace("_", " ")),
                ("position", _ago(group.age(group.position_at, now), "old")),
                ("last delivered slice", f"{when(group.last_delivered_slice_at)} (UTC)"),
            )
        )
        table = Table(title_justify="left")
        table.add_column("consumer", no_wrap=True)
        for name in ("concurrency", "pending", "dead letters"):
            table.add_column(name, justify="right", no_wrap=True)
        for c in group.consumers:
            table.add_row(c.name, str(c.concurrency or "-"), str(c.pending), str(c.dead_letters))
        if not group.consumers:
            table.add_row("-", "-", str(group.pending), "0")
        tables.append(table)
    return tables


def _ago(seconds: float | None, word: str = "ago") -> str:
    if seconds is None:
        return "-"
    for unit, size in (("d", 86_400), ("h", 3_600), ("m", 60)):
        if abs(seconds) >= size:
            return f"{seconds / size:.0f}{unit} {word}"
    return f"{seconds:.0f}s {word}"
