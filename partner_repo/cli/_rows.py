"""Rows for people (dead letters, invariant violations, import issues, the largest units), laid out for the
width they are printed at, ids never broken over lines.

A command describes its columns once (:class:`Column`: an id, a fixed value, or text that may wrap) and hands
its rows to :class:`Rows`, which picks the first layout that fits the terminal (80 columns in a pipe):

- **a table**, one column each;
- **ids stacked**: the id columns in one column, each id on a line of its own (``unit / core``);
- **cards**: one block per row, a name and a value per line, rows apart.

:class:`~partner_repo.cli._output.IdSafeConsole` prints the cards wider than the terminal only when an id
alone is wider than it.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

from rich.console import Console, ConsoleOptions, RenderResult
from rich.table import Table

from partner_repo.cli._output import Fitting, fields, width_keeping_ids

Kind = Literal["id", "fixed", "text"]


@dataclass(frozen=True)
class Column:
    """A column: ``id`` (never wrapped, stacked with the other ids when the row is too wide), ``fixed`` (a
    count or a short code: never wrapped), ``text`` (wraps, a long word folded)."""

    name: str
    kind: Kind = "text"
    justify: Literal["left", "right"] = "left"


class Rows(Fitting):
    """``rows`` (one string per column) under ``title``, in the first layout that fits (module docstring)."""

    def __init__(self, columns: Sequence[Column], rows: Sequence[Sequence[str]], *, title: str | None = None):
        self.columns = list(columns)
        self.rows = [list(row) for row in rows]
        self.title = title

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        for layout in (self.table, self.ids_stacked):
            table = layout()
            if table is not None and width_keeping_ids(console, table) <= options.max_width:
                yield table
                return
        yield self.cards()

    def table(self) -> Table:
        table = self._table()
        for column in self.columns:
            self._add(table, column.name, column)
        for row in self.rows:
            table.add_row(*row)
        return table

    def ids_stacked(self) -> Table | None:
        """The id columns as one, ``a / b`` (None when there are fewer than two ids: nothing to stack)."""
        ids = [n for n, column in enumerate(self.columns) if column.kind == "id"]
        if len(ids) < 2:
            return None
        others = [n for n in range(len(self.columns)) if n not in ids]
        before = [n for n in others if n < ids[0]]
        after = [n for n in others if n > ids[0]]
        table = self._table()
        for n in before:
            self._add(table, self.columns[n].name, self.columns[n])
        stacked = Column(" / ".join(self.columns[n].name for n in ids), "id")
        self._add(table, stacked.name, stacked)
        for n in after:
            self._add(table, self.columns[n].name, self.columns[n])
        for row in self.rows:
            ids_cell = "\n".join(row[n] for n in ids)
            table.add_row(*(row[n] for n in before), ids_cell, *(row[n] for n in after))
        return table

    def cards(self) -> Table:
        lines: list[tuple[str, str]] = []
        for number, row in enumerate(self.rows):
            lines += [("", "")] if number else []
            lines += [(column.name, value) for column, value in zip(self.columns, row, strict=True)]
        grid = fields(*lines)
        grid.title, grid.title_justify = self.title, "left"
        return grid

    def _table(self) -> Table:
        return Table(title=self.title, title_justify="left")

    @staticmethod
    def _add(table: Table, name: str, column: Column) -> None:
        wraps = column.kind == "text"
        table.add_column(name, justify=column.justify, no_wrap=not wraps, overflow="fold")


__all__ = ["Column", "Rows"]
