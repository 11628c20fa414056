"""Output shared by the read commands: rich tables for people, JSON for scripts, and the option types.

People get tables on a rich console; scripts pass ``--json`` and get one JSON document on stdout (dates in ISO
8601 UTC), whatever the terminal. Errors always go to stderr.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any

import click
from pydantic import BaseModel
from pydantic_core import to_jsonable_python
from rich.console import Console
from rich.table import Table

from partner_repo.admin.views import SliceView
from partner_repo.clock import to_utc_ms
from partner_repo.durations import parse_duration

SUMMARY_WIDTH = 60

json_option = click.option(
    "--json", "as_json", is_flag=True, help="Print JSON for scripts instead of a table."
)


def console() -> Console:
    """A console on the current stdout (so click's test runner captures it); never wraps JSON."""
    return Console(soft_wrap=False, highlight=False)


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


def slices_table(views: Iterable[SliceView], *, title: str | None = None) -> Table:
    """One row per slice; long ids fold rather than squeeze the summary out of a narrow terminal."""
    table = Table(title=title, title_justify="left")
    table.add_column("created (UTC)", style="cyan", overflow="fold")
    table.add_column("slice", style="bold", overflow="fold")
    table.add_column("unit", overflow="fold")
    table.add_column("core", overflow="fold")
    table.add_column("messages", overflow="fold")
    table.add_column("summary", overflow="fold")
    for view in views:
        table.add_row(
            when(view.created_at, milliseconds=False),
            view.id,
            view.unit_id,
            view.core_id,
            interval(view.start_index, view.end_index),
            short(view.summary),
        )
    return table


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
