"""``partner-repo listener status``: where every listener group stands, read from the database.

Works from any process (nothing needs to listen here): see :mod:`partner_repo.listener.status` for what each
figure means. Exit 1 when ``--group`` names a group that was never started.
"""

from __future__ import annotations

from dataclasses import asdict
from typing import Any

import click
from rich.table import Table

from partner_repo.cli.output import console, echo_json, json_option, when
from partner_repo.cli.runtime import EXIT_NOT_FOUND, connection, run_async
from partner_repo.clock import utc_now
from partner_repo.listener.status import GroupStatus, listener_status


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
        click.echo(f"no listener group {group!r}", err=True)
        raise SystemExit(EXIT_NOT_FOUND)
    if as_json:
        echo_json([as_document(g) for g in groups])
        return
    if not groups:
        click.echo("no listener groups")
        return
    console().print(_table(groups))


def as_document(group: GroupStatus) -> dict[str, Any]:
    """The JSON form: the status's fields, plus ages in seconds at the time of the command."""
    now = utc_now()
    document = asdict(group)
    document["active"] = group.owner is not None
    document["heartbeat_age_s"] = group.age(group.heartbeat_at, now)
    document["position_age_s"] = group.age(group.position_at, now)
    return document


def _table(groups: list[GroupStatus]) -> Table:
    now = utc_now()
    table = Table(title_justify="left")
    columns = ("group", "owner", "heartbeat", "source", "position", "consumer", "concurrency", "pending",
               "dead letters", "last delivered slice (UTC)")  # fmt: skip
    for name in columns:
        table.add_column(name, overflow="fold")
    for group in groups:
        shared = [
            group.group,
            group.owner or "none (not running)",
            _ago(group.age(group.heartbeat_at, now)),
            (group.source or "-").replace("_", " "),
            _ago(group.age(group.position_at, now), "old"),
        ]
        rows = [
            (c.name, str(c.concurrency or "-"), str(c.pending), str(c.dead_letters)) for c in group.consumers
        ]
        for number, row in enumerate(rows or [("-", "-", str(group.pending), "0")]):
            first = number == 0
            cells = shared if first else [""] * len(shared)
            table.add_row(*cells, *row, when(group.last_delivered_slice_at) if first else "")
    return table


def _ago(seconds: float | None, word: str = "ago") -> str:
    if seconds is None:
        return "-"
    for unit, size in (("d", 86_400), ("h", 3_600), ("m", 60)):
        if abs(seconds) >= size:
            return f"{seconds / size:.0f}{unit} {word}"
    return f"{seconds:.0f}s {word}"
