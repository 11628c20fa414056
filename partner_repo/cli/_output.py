"""Output shared by the read commands: rich tables for people, JSON for scripts, and the option types.

People get tables on a rich console; scripts pass ``--json`` and get one JSON document on stdout (dates in ISO
8601 UTC), whatever the terminal. Errors always go to stderr.
"""

from __future__ import annotations

import json
import textwrap
from abc import ABC, abstractmethod
from collections.abc import Iterable
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any

import click
from pydantic import BaseModel
from pydantic_core import to_jsonable_python
from rich.console import Console, ConsoleOptions, RenderResult
from rich.measure import Measurement
from rich.table import Table

from partner_repo.admin import SliceView
from partner_repo.clock import to_utc_ms
from partner_repo.durations import parse_duration

SUMMARY_WIDTH = 60
SUMMARY_MIN = 36  # a table layout is used only when it leaves the summary this many columns
CARD_SUMMARY_WIDTH = 240
UNBOUNDED_WIDTH = 100_000
WHOLE_WORD = 40
"""In a table's wrapping text column (a message, an error, a reason) a word up to this long (a UUID in quotes)
is kept whole, when the terminal is wide enough (else another layout is chosen); a longer one (a URL,
compact JSON) is folded rather than the table printed wider than the terminal for it."""

json_option = click.option(
    "--json", "as_json", is_flag=True, help="Print JSON for scripts instead of a table."
)


def console() -> Console:
    """A console on the current stdout (so click's test runner captures it); never wraps JSON, never breaks an
    id in a table (:class:`IdSafeConsole`)."""
    return IdSafeConsole(soft_wrap=False, highlight=False)


class IdSafeConsole(Console):
    """A console that never breaks an id across lines (an id split in two cannot be copied).

    Table columns holding ids are made with ``no_wrap=True``: such a column is never narrower than its
    longest cell, and when the terminal (or a pipe's 80 columns) is too narrow for every id column plus the
    shortest the other columns can be, the table is printed wider than the terminal instead. Other text
    columns (summaries, errors) still wrap to fit. Ids may also share one wrapping column with other text
    when every other column is ``no_wrap`` (a grid of names and values): it is never made narrower than its
    longest word.
    """

    def print(self, *objects: Any, **kwargs: Any) -> None:
        tables = [o.cards() if isinstance(o, Fitting) else o for o in objects]
        needed = max((self._width_keeping_ids(o) for o in tables if isinstance(o, Table)), default=0)
        if needed <= self.width:
            super().print(*objects, **kwargs)
            return
        previous = self.width
        self.width = needed
        try:
            super().print(*objects, **kwargs)
        finally:
            self.width = previous

    def _width_keeping_ids(self, table: Table) -> int:
        return width_keeping_ids(self, table)


def width_keeping_ids(console: Console, table: Table) -> int:
    """The narrowest ``table`` can be with every ``no_wrap`` column as wide as its longest cell.

    In a table with borders, a wrapping column needs its longest word up to :data:`WHOLE_WORD` columns (more
    for its header's longest word or its own ``min_width``): rich folds a longer word in it. A grid (no
    borders) keeps every word whole, as ids share its value column (:func:`fields`).
    """
    unbounded = console.options.update_width(UNBOUNDED_WIDTH)
    folding: list[Any] = []
    for column in table.columns:
        if column.no_wrap and column.min_width is None:
            widths = [Measurement.get(console, unbounded, cell).maximum for cell in column.cells]
            column.min_width = max(widths, default=0) or None
        elif not column.no_wrap and table.box is not None and column.max_width is None:
            header = Measurement.get(console, unbounded, column.header).minimum
            column.max_width = max(WHOLE_WORD, header, column.min_width or 0)
            folding.append(column)
    try:
        return Measurement.get(console, unbounded, table).minimum
    finally:
        for column in folding:
            column.max_width = None


def echo_wrapped(text: str) -> None:
    """``text`` on stdout, each line wrapped at word boundaries to the terminal's width (80 columns in a
    pipe), continuation lines indented: an id (one word) is never broken, a line only as wide as its longest
    word needs."""
    width = console().width
    for line in text.splitlines() or [""]:
        wrapped = textwrap.wrap(
            line, width, subsequent_indent="  ", break_long_words=False, break_on_hyphens=False
        )
        click.echo("\n".join(wrapped))


def echo_json(value: BaseModel | dict[str, Any] | list[Any]) -> None:
    click.echo(json.dumps(plain(value), indent=2, ensure_ascii=False))


def plain(value: Any) -> Any:
    """JSON-ready data: models and messages dumped in JSON mode (dates as ISO 8601)."""
    return to_jsonable_python(value)


def when(value: datetime | None, *, milliseconds: bool = True) -> str:
    if value is None:
        return "-"
    text = to_utc_ms(value).strftime("%Y-%m-%d %H:%M:%S.%f")
    return text[:-3] + "Z" if milliseconds else text[:-7]


def short(text: str, width: int = SUMMARY_WIDTH) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= width else flat[: width - 1] + "…"


def share(fraction: float | None) -> str:
    """A share of the 16 MiB limit for people: small non-zero shares are not shown as 0.00%."""
    if fraction is None:
        return "-"
    return "<0.01%" if 0 < fraction < 0.0001 else f"{fraction:.2%}"


def interval(start: int | None, end: int | None) -> str:
    return f"[{start}, {end})"


def slices_table(views: Iterable[SliceView], *, title: str | None = None) -> SliceRows:
    """The slices in the layout the terminal's width allows (:class:`SliceRows`)."""
    return SliceRows(list(views), title=title)


class Fitting(ABC):
    """A renderable laid out for the width it is printed at; :meth:`cards`, its narrowest layout, is what
    :class:`IdSafeConsole` measures to know whether it must print wider than the terminal."""

    @abstractmethod
    def cards(self) -> Table:
        """One card per row: a name and a value per line (:func:`fields`)."""


class SliceRows(Fitting):
    """Slices laid out for the width they are printed at: ids never broken, the summary of a useful width.

    - **one line per slice** (created, slice, unit, core, messages, summary) when that leaves the summary at
      least :data:`SUMMARY_MIN` columns;
    - otherwise **ids stacked** in one column (slice, unit and core on lines of their own, in that order),
      when that leaves the summary :data:`SUMMARY_MIN` columns;
    - otherwise (80 columns with UUIDs) **one card per slice**: a name and value per line, each id on a line
      of its own, the summary wrapped to the terminal's width.
    """

    def __init__(self, views: list[SliceView], *, title: str | None = None) -> None:
        self.views = views
        self.title = title

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        for layout in (self.one_line, self.ids_stacked):
            table = layout()
            if _fits_with_summary(console, options, table):
                yield table
                return
        yield self.cards()

    def one_line(self) -> Table:
        table = self._table()
        for name in ("slice", "unit", "core"):
            table.add_column(name, no_wrap=True)
        table.add_column("messages", no_wrap=True)
        table.add_column("summary", overflow="fold", min_width=self._summary_min())
        for view in self.views:
            created = when(view.created_at, milliseconds=False)
            table.add_row(created, view.id, view.unit_id, view.core_id, _messages(view), short(view.summary))
        return table

    def ids_stacked(self) -> Table:
        table = self._table()
        table.add_column("slice / unit / core", no_wrap=True)
        table.add_column("messages", no_wrap=True)
        table.add_column("summary", overflow="fold", min_width=self._summary_min())
        for view in self.views:
            ids = "\n".join((view.id, view.unit_id, view.core_id))
            created = when(view.created_at, milliseconds=False)
            table.add_row(created, ids, _messages(view), short(view.summary))
        return table

    def cards(self) -> Table:
        rows: list[tuple[str, str]] = []
        for number, view in enumerate(self.views):
            created = when(view.created_at, milliseconds=False)
            rows += [("", "")] if number else []
            rows += [("slice", view.id), ("unit", view.unit_id), ("core", view.core_id)]
            rows += [("created", f"{created}  messages {_messages(view)}")]
            rows += [("summary", short(view.summary, CARD_SUMMARY_WIDTH))]
        grid = fields(*rows)
        grid.title, grid.title_justify = self.title, "left"
        return grid

    def _summary_min(self) -> int:
        return min(SUMMARY_MIN, max((len(short(v.summary)) for v in self.views), default=0)) or 1

    def _table(self) -> Table:
        table = Table(title=self.title, title_justify="left")
        table.add_column("created (UTC)", style="cyan", no_wrap=True)
        return table


def _messages(view: SliceView) -> str:
    return interval(view.start_index, view.end_index)


def _fits_with_summary(console: Console, options: ConsoleOptions, table: Table) -> bool:
    return width_keeping_ids(console, table) <= options.max_width


def fields(*rows: tuple[str, str]) -> Table:
    """Name and value per row; the names never wrap, so the values (ids among them) get the rest."""
    grid = Table.grid(padding=(0, 2))
    grid.add_column(style="bold", no_wrap=True)
    grid.add_column(overflow="fold")
    for name, value in rows:
        grid.add_row(name, value)
    return grid


if TYPE_CHECKING:
    _DateTimeParam = click.ParamType[datetime]
    _TimedeltaParam = click.ParamType[timedelta]
    _FloatParam = click.ParamType[float]
else:  # click < 8.2 has no generic ParamType
    _DateTimeParam = _TimedeltaParam = _FloatParam = click.ParamType


class IsoDateTime(_DateTimeParam):
    """An ISO 8601 date or date-time (``2024-03-01``, ``2024-03-01T09:30``, ``...Z``, ``...+02:00``);
    without a zone it is taken as UTC."""

    name = "DATETIME"

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> datetime:
        if isinstance(value, datetime):
            return to_utc_ms(value)
        try:
            parsed = datetime.fromisoformat(str(value).strip())
        except ValueError:
            self.fail(f"{value!r} is not an ISO 8601 date or date-time (e.g. 2024-03-01T09:30Z)", param, ctx)
        return to_utc_ms(parsed if parsed.tzinfo else parsed.replace(tzinfo=UTC))


ISO_DATETIME = IsoDateTime()


class Duration(_TimedeltaParam):
    """A duration in any form the settings take (:func:`~partner_repo.durations.parse_duration`): seconds,
    ISO 8601 (``PT30M``) or ``HH:MM:SS``; never negative, and not zero when ``positive``."""

    name = "DURATION"

    def __init__(self, *, positive: bool = False) -> None:
        self.positive = positive

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> timedelta:
        try:
            parsed = value if isinstance(value, timedelta) else parse_duration(value)
        except ValueError as exc:
            self.fail(f"{value!r} is {exc}", param, ctx)
        if parsed < timedelta(0) or (self.positive and not parsed):
            self.fail(f"{value!r} must be {'positive' if self.positive else 'at least 0'}", param, ctx)
        return parsed


class Seconds(_FloatParam):
    """A :class:`Duration` handed to the command as seconds (a float), for options that take seconds."""

    name = "DURATION"

    def __init__(self, *, positive: bool = False) -> None:
        self.duration = Duration(positive=positive)

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> float:
        if isinstance(value, float):
            value = timedelta(seconds=value)
        return self.duration.convert(value, param, ctx).total_seconds()
