"""``partner-repo recall CORE QUERY``, ``recall topics CORE`` and ``recall reindex``: recall from the command
line.

``recall CORE QUERY`` prints the slices :class:`~partner_repo.recall.MemoryRecall` activates for the query,
best first, each with its raw messages; ``recall topics CORE`` prints the core's topic tree. Both read the
index :class:`~partner_repo.recall.RecallIndexer` builds (``partner-repo listen --recall``), with the admin
read preference. ``recall reindex --embedder MODULE:NAME`` embeds the indexed slices again (vectors for the
slices indexed without them, or of another embedder), batched and resumable; ``--embedder``
(:func:`~partner_repo.cli._plugins.load_embedder`) is what ``recall``, ``listen --recall``,
``dead-letters replay --recall`` and ``mcp`` take too.

``recall`` is a group whose default command is ``search``: a first argument that is not ``search`` or
``topics`` is a core, so ``recall CORE QUERY`` is ``recall search CORE QUERY``. A core named ``search`` or
``topics`` is reached through the explicit form (``recall search topics QUERY``).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Any
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

import click
from rich.console import Console, Group, RenderableType
from rich.table import Table

from partner_repo.cli._output import ISO_DATETIME, console, echo_json, fields, json_option, plain, short, when
from partner_repo.cli._plugins import embedder_option, load_embedder
from partner_repo.cli._progress import counted_progress
from partner_repo.cli._runtime import connection, run_async
from partner_repo.cli._slices import open_admin, require_core, speaker, usage_errors
from partner_repo.clock import utc_now
from partner_repo.recall import (
    MAX_LIMIT,
    MAX_MESSAGES,
    ActivatedSlice,
    DateCue,
    Embedder,
    EventCue,
    MemoryRecall,
    RecallIndexer,
    ReindexReport,
    TopicNode,
    date_cues,
    event_cues,
)

DEFAULT_COMMAND = "search"
REINDEX_PAGE = 32
MAX_REINDEX_PAGE = 1000
MESSAGE_WIDTH = 500
"""A raw message longer than this is cut in the table (``--json`` gives it whole)."""
INDEX_HINT = "partner-repo listen --group recall --recall"


class RecallGroup(click.Group):
    """``recall``: a first argument that names no subcommand (nor asks for help) goes to ``search``."""

    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        first = self._first_argument(ctx, args)
        if (
            first is not None
            and args[first] not in self.commands
            and args[first] not in ctx.help_option_names
        ):
            args = [*args[:first], DEFAULT_COMMAND, *args[first:]]
        return super().parse_args(ctx, args)

    def _first_argument(self, ctx: click.Context, args: list[str]) -> int | None:
        """Where the first argument that is not one of the group's own options (the root options it accepts
        too, ``recall --in-memory topics alice``) is, or None; a help option counts as an argument."""
        takes_value = {
            name: not (param.is_flag or param.count)
            for param in self.get_params(ctx)
            if isinstance(param, click.Option)
            for name in (*param.opts, *param.secondary_opts)
        }
        position = 0
        while position < len(args):
            argument = args[position]
            name = argument.split("=", 1)[0]
            if argument in ctx.help_option_names or name not in takes_value:
                return position
            position += 2 if takes_value[name] and "=" not in argument else 1
        return None


if TYPE_CHECKING:
    _ZoneParam = click.ParamType[ZoneInfo]
else:  # click < 8.2 has no generic ParamType
    _ZoneParam = click.ParamType


class TimeZone(_ZoneParam):
    """An IANA time zone name (``UTC``, ``Europe/Paris``, ``Asia/Shanghai``)."""

    name = "ZONE"

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> ZoneInfo:
        if isinstance(value, ZoneInfo):
            return value
        try:
            return ZoneInfo(str(value).strip())
        except (ZoneInfoNotFoundError, ValueError):
            self.fail(
                f"{value!r} is not a time zone name (e.g. UTC, Europe/Paris, Asia/Shanghai)", param, ctx
            )


@click.group(cls=RecallGroup, subcommand_metavar="CORE QUERY | COMMAND [ARGS]...")
def recall() -> None:
    """Recall what a core's memory says about a query: recall CORE QUERY, or recall topics CORE.

    A first argument other than search or topics is a core: recall CORE QUERY is recall search CORE QUERY
    (for a core named search or topics, write recall search CORE QUERY). Reads the index that listen --recall
    builds.
    """


@recall.command(DEFAULT_COMMAND)
@click.argument("core_id", metavar="CORE")
@click.argument("query")
@click.option(
    "--since",
    type=ISO_DATETIME,
    default=None,
    help="Only slices whose conversation went on at or after this (UTC unless it has an offset).",
)
@click.option(
    "--until",
    type=ISO_DATETIME,
    default=None,
    help="Only slices whose conversation began before this (UTC unless it has an offset).",
)
@click.option(
    "--limit", type=click.IntRange(1, MAX_LIMIT), default=10, show_default=True, help="Most slices."
)
@click.option(
    "--max-messages",
    type=click.IntRange(1, MAX_MESSAGES),
    default=40,
    show_default=True,
    help="Most raw messages, all slices together.",
)
@click.option(
    "--tz",
    type=TimeZone(),
    default="UTC",
    show_default=True,
    help="The zone the query's dates (yesterday, last week, May 7, 昨天) are read in and days are shown in.",
)
@click.option(
    "--why", is_flag=True, help="Show what each part of a score added, and the query's date and event cues."
)
@embedder_option(
    "Embed the query with this embedder (the one the core's vectors are of) for the vector channel."
)
@json_option
@click.pass_context
def search(
    ctx: click.Context,
    core_id: str,
    query: str,
    since: datetime | None,
    until: datetime | None,
    limit: int,
    max_messages: int,
    tz: ZoneInfo,
    why: bool,
    embedder_path: str | None,
    as_json: bool,
) -> None:
    """The slices of CORE that QUERY is about, best first, each with its raw messages.

    A query naming nothing the index knows (no word, topic or date of it) gets the newest slices (found by
    recent); with --embedder, the vector channel finds the slices nearest to it instead.
    """
    now = utc_now()
    embedder = load_embedder(embedder_path) if embedder_path else None
    asked = _Asked(core_id, query, since, until, limit, max_messages, tz, now, why, embedder)
    found, indexed = run_async(lambda: _recalled(ctx, asked))
    cues = date_cues(query, now=now, tz=tz)
    events = event_cues(query, now=now, tz=tz)
    if as_json:
        echo_json(_search_json(asked, cues, events, found))
    else:
        _print_search(asked, cues, events, found, indexed)


@dataclass(frozen=True)
class _Asked:
    """What ``recall search`` was asked."""

    core_id: str
    query: str
    since: datetime | None
    until: datetime | None
    limit: int
    max_messages: int
    tz: ZoneInfo
    now: datetime
    why: bool
    embedder: Embedder | None = None


async def _recalled(ctx: click.Context, asked: _Asked) -> tuple[list[ActivatedSlice], bool]:
    """The recalled slices, and whether the core has anything indexed (a core that does not exist at all
    is one line and exit 1)."""
    with usage_errors():
        database = await open_admin(ctx)
        recaller = MemoryRecall(database, tz=asked.tz, embedder=asked.embedder)
        found = await recaller.recall(
            asked.core_id,
            asked.query,
            limit=asked.limit,
            max_messages=asked.max_messages,
            since=asked.since,
            until=asked.until,
            now=asked.now,
            explain=asked.why,
        )
        if found:
            return found, True
        indexed = bool(await recaller.topics(asked.core_id))
        if not indexed:
            await require_core(database, asked.core_id)
        return found, indexed


def _search_json(
    asked: _Asked, cues: Sequence[DateCue], events: Sequence[EventCue], found: Sequence[ActivatedSlice]
) -> dict[str, Any]:
    return {
        "core_id": asked.core_id,
        "query": asked.query,
        "now": plain(asked.now),
        "tz": asked.tz.key,
        "since": plain(asked.since),
        "until": plain(asked.until),
        "date_cues": [_cue_json(cue) for cue in cues],
        "event_cues": [_event_json(cue) for cue in events],
        "slices": [activated_json(piece) for piece in found],
    }


def _print_search(
    asked: _Asked,
    cues: Sequence[DateCue],
    events: Sequence[EventCue],
    found: Sequence[ActivatedSlice],
    indexed: bool,
) -> None:
    out = console()
    if asked.why:
        out.print(_cues_line(cues, asked.tz))
        if events:
            out.print(_events_line(events))
    if not found:
        out.print(_nothing(asked.core_id, asked.query, indexed, asked.since, asked.until))
        return
    messages = sum(len(piece.messages) for piece in found)
    out.print(
        f"recalled {len(found)} slice(s), {messages} message(s) of core {asked.core_id!r} for "
        f"{short(asked.query, 80)!r}"
    )
    for number, piece in enumerate(found, 1):
        out.print(activated_view(piece, number, asked.tz, why=asked.why))


@recall.command("reindex")
@click.option("--core", "core_id", default=None, metavar="CORE", help="Only this core [default: every core].")
@embedder_option("The embedder to embed the slices with.", required=True)
@click.option(
    "--page",
    type=click.IntRange(1, MAX_REINDEX_PAGE),
    default=REINDEX_PAGE,
    show_default=True,
    help="Slices embedded in one call of the embedder.",
)
@json_option
@click.pass_context
def reindex(ctx: click.Context, core_id: str | None, embedder_path: str, page: int, as_json: bool) -> None:
    """Embed the indexed slices again with an embedder: vectors for the slices indexed without them, or
    in place of another embedder's (the core then records this one, and a recall must use it).

    Batched (PAGE slices an embedder call) and resumable: a slice that has this embedder's vectors is
    skipped, so an interrupted run is finished by running it again. Safe beside a running listener: each
    slice's vectors are written once, for the revision they were made of, and never for an erased slice.
    """
    embedder = load_embedder(embedder_path)
    target = connection(ctx, "write")
    report = ReindexReport()

    def interrupted(done: int, total: int) -> str:
        return (
            f"stopped at {report.where()} ({done} of {total} slice(s) gone through, {report.embedded} "
            "embedded); run the same command again to continue: slices already embedded are skipped"
        )

    async def work() -> ReindexReport:
        with usage_errors(), counted_progress("embedding slices", interrupted) as progress:
            database = await target.open()
            if core_id is not None:
                await require_core(database, core_id)
            indexer = RecallIndexer(database, embedder=embedder)
            return await indexer.reindex(core_id, page=page, progress=progress, report=report)

    done = run_async(work)
    if as_json:
        echo_json(asdict(done))
        return
    out = console()
    for core, before in done.replaced.items():
        out.print(f"core {core!r}: replaced the vectors of embedder {before}")
    out.print(
        f"{done.cores} core(s), {done.slices} slice(s): {done.embedded} embedded, {done.skipped} already "
        f"embedded, {done.unreadable} unreadable (unit erased or gone), {done.changed} changed meanwhile "
        "(re-summarized or erased: indexed by their own delivery)"
    )


@recall.command("topics")
@click.argument("core_id", metavar="CORE")
@json_option
@click.pass_context
def topics(ctx: click.Context, core_id: str, as_json: bool) -> None:
    """The topic tree of CORE: every topic path with the number of indexed slices under it."""

    async def work() -> list[TopicNode]:
        with usage_errors():
            database = await open_admin(ctx)
            nodes = await MemoryRecall(database).topics(core_id)
            if not nodes:
                await require_core(database, core_id)
            return nodes

    nodes = run_async(work)
    if as_json:
        echo_json({"core_id": core_id, "topics": [_node_json(node) for node in nodes]})
        return
    out = console()
    if not nodes:
        out.print(_not_indexed(core_id))
        return
    out.print(f"topics of core {core_id!r}")
    out.print(topic_tree(nodes))
    out.print(f"{len(nodes)} topic(s) over {sum(n.slices for n in nodes if n.depth == 1)} slice(s)")


def _node_json(node: TopicNode) -> dict[str, Any]:
    """A node for scripts: its readable path, depth and slice count, and the path the index matches it by."""
    return {"path": node.path, "depth": node.depth, "slices": node.slices, "key": node.key or node.path}


def topic_tree(nodes: Sequence[TopicNode]) -> Table:
    """The paths as a tree: each node's own name, indented two spaces a level, and its slice count."""
    table = Table()
    table.add_column("topic", overflow="fold")
    table.add_column("slices", justify="right", no_wrap=True)
    for node in nodes:
        name = node.path.split("->")[-1]
        table.add_row("  " * (node.depth - 1) + name, str(node.slices))
    return table


def activated_view(piece: ActivatedSlice, number: int, tz: ZoneInfo, *, why: bool = False) -> RenderableType:
    """One recalled slice: its ids, day, topic, how it was found and its summary, then its raw messages."""
    heading = f"[bold]#{number}[/]  score {piece.score:.3f}, found by {', '.join(piece.sources)}"
    rows = [
        ("slice", piece.slice_id),
        ("unit", piece.unit_id),
        ("day", _span(piece, tz)),
        ("topic", piece.topic),
        ("summary", piece.summary),
    ]
    if why and piece.why is not None:
        rows.append(("why", _why(piece.why)))
    table = Table(show_edge=False, box=None, padding=(0, 1), pad_edge=False)
    table.add_column("#", justify="right", style="dim", no_wrap=True)
    table.add_column("role", no_wrap=True)
    table.add_column("content", overflow="fold")
    for position, message in zip(piece.positions, piece.messages, strict=True):
        table.add_row(str(position), speaker(message), short(message.content, MESSAGE_WIDTH))
    return Group(heading, fields(*rows), table, "")


def activated_json(piece: ActivatedSlice) -> dict[str, Any]:
    """A recalled slice for scripts: every field of :class:`ActivatedSlice`, each message with its
    position."""
    return {
        "slice_id": piece.slice_id,
        "unit_id": piece.unit_id,
        "core_id": piece.core_id,
        "summary": piece.summary,
        "day": plain(piece.day),
        "began_at": plain(piece.began_at),
        "ended_at": plain(piece.ended_at),
        "topic": piece.topic,
        "sources": list(piece.sources),
        "score": piece.score,
        "why": piece.why,
        "messages": [
            {"position": position, **plain(message)}
            for position, message in zip(piece.positions, piece.messages, strict=True)
        ],
    }


def print_recalled(out: Console, found: Sequence[ActivatedSlice], tz: ZoneInfo) -> None:
    """Each recalled slice as ``recall`` prints it (the demo's recall)."""
    for number, piece in enumerate(found, 1):
        out.print(activated_view(piece, number, tz))


def _span(piece: ActivatedSlice, tz: ZoneInfo) -> str:
    """The slice's conversation in ``tz``: ``2026-12-02 09:14 to 10:02 UTC`` (the end's day too if it
    differs)."""
    began, ended = piece.began_at.astimezone(tz), piece.ended_at.astimezone(tz)
    end = f"{ended:%H:%M}" if ended.date() == began.date() else f"{ended:%Y-%m-%d %H:%M}"
    return f"{began:%Y-%m-%d %H:%M} to {end} {tz.key}"


def _why(parts: dict[str, float]) -> str:
    return " + ".join(f"{name} {value:.3f}" for name, value in parts.items())


def _cue_json(cue: DateCue) -> dict[str, str]:
    return {"text": cue.text, "start": cue.start.isoformat(), "end": cue.end.isoformat()}


def _event_json(cue: EventCue) -> dict[str, Any]:
    return {"text": cue.text, "event": cue.event, "before": cue.before, "days": cue.days}


def _events_line(events: Sequence[EventCue]) -> str:
    read = ", ".join(
        f"{cue.text!r} = {'before' if cue.before else 'after'} {cue.event!r}"
        + ("" if cue.days is None else f", {cue.days} day(s)")
        for cue in events
    )
    return f"event cues: {read}"


def _cues_line(cues: Sequence[DateCue], tz: ZoneInfo) -> str:
    if not cues:
        return "date cues: none in the query"
    read = ", ".join(
        f"{cue.text!r} = {cue.start.isoformat()}"
        + ("" if (cue.end - cue.start).days == 1 else f" to {cue.end.isoformat()} (exclusive)")
        for cue in cues
    )
    return f"date cues ({tz.key}): {read}"


def _not_indexed(core_id: str) -> str:
    return f"core {core_id!r} has no indexed slices yet; index them with:\n  {INDEX_HINT}"


def _nothing(core_id: str, query: str, indexed: bool, since: datetime | None, until: datetime | None) -> str:
    if not indexed:
        return f"nothing recalled: {_not_indexed(core_id)}"
    window = (f" since {when(since)}" if since else "") + (f" before {when(until)}" if until else "")
    return f"nothing recalled from core {core_id!r} for {short(query, 80)!r}{window}"
