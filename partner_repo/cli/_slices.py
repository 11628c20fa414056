"""``partner-repo slices list|show|stats`` and ``partner-repo units show``: read-only looks into memory.

They read with the admin read preference (secondaries allowed, see :func:`partner_repo.admin_database`).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import click
from rich.table import Table

from partner_repo.admin import (
    DEFAULT_LIMIT,
    MAX_LIMIT,
    MemoryStats,
    SliceDetail,
    SlicePage,
    SliceQueries,
    UnitView,
)
from partner_repo.cli._output import (
    ISO_DATETIME,
    console,
    echo_json,
    fields,
    interval,
    json_option,
    plain,
    share,
    short,
    slices_table,
    when,
)
from partner_repo.cli._rows import Column, Rows
from partner_repo.cli._runtime import connection, note_interruption, run_async
from partner_repo.cores import MemoryCoreRepository
from partner_repo.errors import EmbedderMismatch, InvalidCursor, InvalidInput, InvalidSettings, NotFound
from partner_repo.models import Message
from partner_repo.mongo import UNITS, MongoDatabase

MESSAGE_WIDTH = 100


async def open_admin(ctx: click.Context) -> MongoDatabase:
    """The configured database with the admin read preference."""
    from partner_repo.settings import admin_database, load_settings

    return admin_database(await connection(ctx, "read").open(), load_settings())


async def require_core(database: MongoDatabase, core_id: str) -> None:
    """:class:`NotFound` when ``core_id`` names no core (no core document, no unit): a typo, most likely,
    which an empty answer would pass over."""
    if await MemoryCoreRepository(database).get(core_id) is not None:
        return
    if await database[UNITS].find_one({"core_id": core_id}, {"_id": 1}) is None:
        raise NotFound(f"no core {core_id!r}: no core document and no unit has that core id")


@contextmanager
def usage_errors(cursor_option: str = "--after") -> Iterator[None]:
    """Bad filter values are usage errors (exit 2), not failures; a bad setting, or an embedder other than the
    core's, stays one line of its own (nothing in the command line is misused)."""
    try:
        yield
    except (InvalidSettings, EmbedderMismatch):
        raise
    except InvalidCursor as exc:
        raise click.BadParameter(str(exc), param_hint=cursor_option) from None
    except InvalidInput as exc:
        raise click.UsageError(str(exc)) from None


@click.group()
def slices() -> None:
    """List slices, show one with its messages, or show statistics."""


@slices.command("list")
@click.option("--core", "core_id", default=None, help="Only this core's slices.")
@click.option("--unit", "unit_id", default=None, help="Only this unit's slices.")
@click.option("--from", "created_from", type=ISO_DATETIME, default=None, help="Created at or after (UTC).")
@click.option("--to", "created_to", type=ISO_DATETIME, default=None, help="Created before (UTC, exclusive).")
@click.option("--text", default=None, help="Case-insensitive substring of the summary, taken literally.")
@click.option("--order", type=click.Choice(["desc", "asc"]), default="desc", show_default=True)
@click.option(
    "--limit",
    type=click.IntRange(min=1),
    default=DEFAULT_LIMIT,
    show_default=True,
    help=f"Slices per page (capped at {MAX_LIMIT}).",
)
@click.option("--after", default=None, metavar="CURSOR", help="Continue after a page (its next cursor).")
@click.option("--all", "walk_all", is_flag=True, help="Walk every page.")
@json_option
@click.pass_context
def list_slices(
    ctx: click.Context,
    core_id: str | None,
    unit_id: str | None,
    created_from: datetime | None,
    created_to: datetime | None,
    text: str | None,
    order: str,
    limit: int,
    after: str | None,
    walk_all: bool,
    as_json: bool,
) -> None:
    """List slices newest first (with --order asc, oldest first), one page or --all."""
    filters: dict[str, Any] = {
        "core_id": core_id,
        "unit_id": unit_id,
        "created_from": created_from,
        "created_to": created_to,
        "text": text,
        "order": order,
        "limit": limit,
    }
    run_async(lambda: _list(ctx, filters, _Listing(as_json, walk_all, resume=after)))


async def _list(ctx: click.Context, filters: dict[str, Any], listing: _Listing) -> None:
    """Read page after page (one without --all), printing each as it comes: an interrupted --all has printed
    every page it read, and says the cursor after the last one."""
    database = await open_admin(ctx)
    queries = SliceQueries(database)
    if listing.walk_all:
        note_interruption(listing.interrupted)
    cursor = listing.resume
    while True:
        with usage_errors():
            page = await queries.find(after=cursor, **filters)
        if not page.items and not listing.shown:
            await _known_filters(database, filters["core_id"], filters["unit_id"])
        listing.show(page)
        cursor = page.next_cursor
        if cursor is None or not listing.walk_all:
            break
    listing.finish(cursor)


async def _known_filters(database: MongoDatabase, core_id: str | None, unit_id: str | None) -> None:
    """:class:`NotFound` when ``--core`` or ``--unit`` names nothing stored (a typo, most likely), rather than
    an empty list."""
    if core_id is not None:
        await require_core(database, core_id)
    if unit_id is not None and await database[UNITS].find_one({"_id": unit_id}, {"_id": 1}) is None:
        raise NotFound(f"no unit {unit_id!r}")


@dataclass
class _Listing:
    """How ``slices list`` prints its pages: a table per page for people, one JSON page, or every page
    streamed as one JSON document (``--json --all``, memory bounded by a page); and how far it got."""

    as_json: bool
    walk_all: bool
    resume: str | None
    """The cursor after the last page printed in full (where ``--after`` continues)."""
    shown: int = 0

    @property
    def streamed(self) -> bool:
        return self.as_json and self.walk_all

    def show(self, page: SlicePage) -> None:
        if self.streamed:
            for item in page.items:
                opening = ",\n" if self.shown else '{"items": [\n'
                click.echo(opening + json.dumps(plain(item), ensure_ascii=False), nl=False)
                self.shown += 1
        else:
            if self.as_json:
                echo_json(page)
            elif page.items or not self.shown:
                console().print(slices_table(page.items))
            self.shown += len(page.items)
        self.resume = page.next_cursor

    def finish(self, cursor: str | None) -> None:
        if self.streamed:
            click.echo(('{"items": [' if not self.shown else "") + '\n], "next_cursor": null}')
        elif not self.as_json:
            out = console()
            out.print(f"{self.shown} slice(s)")
            if cursor is not None:
                out.print(f"more: add --after {cursor}", soft_wrap=True)

    def interrupted(self) -> str:
        if not self.shown:
            return "no slice printed yet; run it again to list them"
        if self.resume is None:
            return f"printed {self.shown} slice(s); run it again to list them from the start"
        return (
            f"printed {self.shown} slice(s); add --after {self.resume} to continue after the last page "
            "printed in full"
        )


@slices.command("show")
@click.argument("slice_id")
@json_option
@click.pass_context
def show_slice(ctx: click.Context, slice_id: str, as_json: bool) -> None:
    """Show one slice, its unit and core, and the messages it summarises."""

    async def work() -> SliceDetail:
        with usage_errors():
            return await SliceQueries(await open_admin(ctx)).require(slice_id)

    detail = run_async(work)
    if as_json:
        echo_json(detail)
        return
    out = console()
    out.print(
        fields(
            ("slice", detail.id),
            ("unit", detail.unit_id),
            ("core", detail.core_id),
            ("created", when(detail.created_at)),
            (
                "interval",
                f"{interval(detail.start_index, detail.end_index)}: {detail.message_count} message(s)",
            ),
            ("rolled with", _roll(detail.rolling_size, detail.retain_divisor)),
            ("summary", detail.summary),
        )
    )
    out.print(_messages_table(detail.messages, first=detail.start_index or 0))


@slices.command("stats")
@click.option("--core", "core_id", default=None, help="Only this core.")
@click.option("--days", type=click.IntRange(min=1, max=366), default=30, show_default=True)
@click.option("--largest", type=click.IntRange(min=1, max=MAX_LIMIT), default=5, show_default=True)
@click.option(
    "--all-days", is_flag=True, help="List every day of the period, also those without slices (--json does)."
)
@json_option
@click.pass_context
def slice_stats(
    ctx: click.Context, core_id: str | None, days: int, largest: int, all_days: bool, as_json: bool
) -> None:
    """Units, slices, messages; slices per day; the largest units and their share of 16 MiB."""

    async def work() -> MemoryStats:
        with usage_errors():
            database = await open_admin(ctx)
            stats = await SliceQueries(database).stats(core_id, days=days, largest=largest)
        if not stats.units:
            await _known_filters(database, core_id, None)
        return stats

    stats = run_async(work)
    if as_json:
        echo_json(stats)
        return
    out = console()
    for renderable in stats_tables(stats, quiet_days=not all_days):
        out.print(renderable)


def stats_tables(stats: MemoryStats, *, quiet_days: bool = True) -> list[Table | Rows]:
    """Totals, slices per day (days without slices left out unless ``quiet_days=False``), largest units."""
    totals = fields(
        ("core", stats.core_id or "(all cores)"),
        ("units", str(stats.units)),
        ("slices", str(stats.slices)),
        ("messages", str(stats.messages)),
    )
    peak = max((d.slices for d in stats.slices_per_day), default=0) or 1
    per_day = Table(title="slices per day (UTC)", title_justify="left")
    per_day.add_column("day", no_wrap=True)
    per_day.add_column("slices", justify="right", no_wrap=True)
    per_day.add_column("")
    for day in stats.slices_per_day:
        if day.slices or not quiet_days:
            per_day.add_row(day.day.isoformat(), str(day.slices), "█" * round(20 * day.slices / peak))
    if not per_day.rows:
        quiet = len(stats.slices_per_day)
        per_day = fields(("slices per day", f"none in the last {quiet} day{'s' if quiet != 1 else ''} (UTC)"))
    sizes = Rows(
        [Column("unit", "id"), Column("core", "id")]
        + [Column(name, "fixed", "right") for name in ("messages", "bytes", "of 16 MiB")],
        [
            [
                unit.unit_id,
                unit.core_id,
                str(unit.message_count),
                f"{unit.size_bytes:,}",
                share(unit.share_of_limit),
            ]
            for unit in stats.largest_units
        ],
        title="largest units",
    )
    return [totals, per_day, sizes]


@click.group()
def units() -> None:
    """Look into memory units."""


@units.command("show")
@click.argument("unit_id")
@click.option("--messages", "with_messages", is_flag=True, help="Also print the unit's messages.")
@json_option
@click.pass_context
def show_unit(ctx: click.Context, unit_id: str, with_messages: bool, as_json: bool) -> None:
    """Show a unit: counts, size, version and slices (and its messages with --messages)."""

    async def work() -> tuple[UnitView, list[Message] | None]:
        with usage_errors():
            queries = SliceQueries(await open_admin(ctx))
            view = await queries.unit(unit_id)
            if not with_messages:
                return view, None
            return view, await queries.messages(unit_id, 0, view.message_count)

    view, messages = run_async(work)
    if as_json:
        document = plain(view)
        if messages is not None:
            document["messages"] = plain(messages)
        echo_json(document)
        return
    out = console()
    size = (
        "-"
        if view.size_bytes is None
        else f"{view.size_bytes:,} bytes ({share(view.share_of_limit)} of 16 MiB)"
    )
    out.print(
        fields(
            ("unit", view.id),
            ("core", view.core_id),
            ("messages", str(view.message_count)),
            ("slices", str(len(view.slices))),
            ("size", size),
            ("updated", when(view.updated_at)),
            ("version", str(view.version)),
            ("previous unit", view.previous_unit_id or "-"),
        )
    )
    out.print(slices_table(view.slices, title="slices"))
    if messages is not None:
        out.print(_messages_table(messages, first=0))


def _messages_table(messages: list[Message], *, first: int) -> Table:
    table = Table(title="messages", title_justify="left")
    table.add_column("#", justify="right")
    table.add_column("role")
    table.add_column("content", overflow="fold")
    for offset, message in enumerate(messages):
        table.add_row(str(first + offset), speaker(message), short(message.content, MESSAGE_WIDTH))
    return table


def speaker(message: Message) -> str:
    """The role, with the speaker's (or tool's) name and the tool call a message answers, when set."""
    details = [
        part for part in (message.name, message.tool_call_id and f"call {message.tool_call_id}") if part
    ]
    return f"{message.role} ({', '.join(details)})" if details else message.role


def _roll(rolling_size: int | None, retain_divisor: int | None) -> str:
    if rolling_size is None:
        return "- (not from a roll)"
    return f"rolling_size={rolling_size}, retain_divisor={retain_divisor}"
