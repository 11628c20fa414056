"""``partner-repo demo``: the main job, the whole system working on one scripted conversation, in seconds.

A traveller and an assistant talk for 52 turns (104 messages). Every turn is recorded in the core's chat
window and offered to :class:`RollingService`; the count trigger rolls the window three times, then a
simulated hour of silence lets the idle trigger roll the rest and open a new memory session. A
:class:`RollingListener` runs meanwhile with a consumer that prints each :class:`RollingResult` as it arrives.
Then the slices are listed with :class:`SliceQueries` and the statistics printed; finally the rolls are
indexed with :class:`RecallIndexer` and :class:`MemoryRecall` answers one question with the raw messages.

Without ``--uri`` it runs on the embedded in-memory backend and ignores ``MONGODB_URI``, so demo data never
lands in a configured database by accident. With ``--uri`` it writes to its own database (``partner_demo``
unless ``--db`` is given) and leaves the data there for ``slices list`` to show.
"""

from __future__ import annotations

import asyncio
import time
from datetime import datetime, timedelta
from zoneinfo import ZoneInfo

import click
from rich.console import Console

from partner_repo.admin import MAX_LIMIT, SliceQueries, SliceView
from partner_repo.cli._demo_script import TURNS
from partner_repo.cli._output import console, short, slices_table
from partner_repo.cli._recall import print_recalled
from partner_repo.cli._runtime import Connection, run_async
from partner_repo.cli._slices import stats_tables
from partner_repo.clock import to_utc_ms, utc_now
from partner_repo.cores import MemoryCoreRepository
from partner_repo.events import RollingResult
from partner_repo.listener import RollingListener
from partner_repo.listener.delivery import AfterRollingRegistry
from partner_repo.models import Message
from partner_repo.mongo import MongoDatabase, mask_uri
from partner_repo.recall import MemoryRecall, RecallIndexer
from partner_repo.rolling import ExtractiveSummarizer, RollingConfig, RollingService

DEMO_DB = "partner_demo"
DEMO_CORE = "demo"
CONFIG = RollingConfig(trigger_limit=30, retain_divisor=6, idle_after=timedelta(minutes=30))
"""Rolls after 30 messages, keeps a sixth as context, and counts 30 quiet minutes as idle."""
TURN_GAP = timedelta(minutes=2)
DELIVERY_TIMEOUT = 15.0
"""Seconds to wait for the listener to deliver a roll before the demo says so and goes on."""
QUESTION = "Where can I eat vegetarian food?"
"""What the demo asks recall at the end."""


class SimulatedClock:
    """The demo's time: it starts three hours ago and moves only when the script says so."""

    def __init__(self, start: datetime) -> None:
        self._now = to_utc_ms(start)

    def __call__(self) -> datetime:
        return self._now

    def advance(self, delta: timedelta) -> datetime:
        self._now = to_utc_ms(self._now + delta)
        return self._now


class PrintingConsumer:
    """An AfterRolling consumer that prints each RollingResult the listener delivers."""

    name = "demo-printer"

    def __init__(self, out: Console) -> None:
        self._out = out
        self._arrived: dict[str, asyncio.Event] = {}

    async def consume(self, result: RollingResult) -> None:
        piece = result.memory_slice
        self._out.print(
            f"  [magenta]listener[/] ▸ RollingResult: slice {piece.id} of unit {result.memory_unit.id}, "
            f"messages [{piece.start_index}, {piece.end_index}) ({len(result.increment_messages)} new, "
            f"rolling_size={result.rolling_size}, retain_divisor={result.retain_divisor})\n"
            f"             summary: {short(result.summary, 160)}",
            highlight=False,
        )
        self._event(result.slice_id).set()

    async def wait_for(self, slice_id: str) -> bool:
        """Whether the listener delivered ``slice_id`` within :data:`DELIVERY_TIMEOUT`."""
        try:
            await asyncio.wait_for(self._event(slice_id).wait(), DELIVERY_TIMEOUT)
        except TimeoutError:
            return False
        return True

    def _event(self, slice_id: str) -> asyncio.Event:
        return self._arrived.setdefault(slice_id, asyncio.Event())


@click.command()
@click.option("--core", "core_id", default=DEMO_CORE, show_default=True, help="Core to record the demo into.")
@click.pass_context
def demo(ctx: click.Context, core_id: str) -> None:
    """Record a 104-message conversation, roll it by count and idle, listen, list slices and stats, recall.

    Runs on the in-memory backend (MONGODB_URI is ignored) unless --uri is given; then it writes to the
    database 'partner_demo' (or --db) and leaves the data there.
    """
    root = ctx.find_root()
    uri: str | None = root.meta.get("explicit_uri")
    db_name: str = root.meta.get("explicit_db") or DEMO_DB
    out = console()

    async def work() -> None:
        started = time.monotonic()
        database = await Connection(uri=uri, db_name=db_name).open()
        if uri is None:
            out.print(
                "[bold]partner-repo demo[/] on the embedded in-memory backend (nothing goes to a server)"
            )
        else:
            out.print(f"[bold]partner-repo demo[/] on MongoDB at {mask_uri(uri)}, database {db_name!r}")
        await run_demo(database, core_id=core_id, out=out)
        out.print(f"done in {time.monotonic() - started:.1f}s")
        if uri is not None:
            out.print(
                f"the data stays in {db_name!r}: partner-repo --uri '{mask_uri(uri)}' --db {db_name} "
                f"slices list --core {core_id}",
                soft_wrap=True,
            )

    run_async(work)


async def run_demo(database: MongoDatabase, *, core_id: str, out: Console) -> None:
    """The scripted conversation, its rolls as the listener delivers them, slices and statistics, recall."""
    clock = SimulatedClock(utc_now() - timedelta(hours=3))
    rolling = RollingService(
        database, ExtractiveSummarizer(max_sentences=3, max_chars=300), CONFIG, clock=clock
    )
    cores = MemoryCoreRepository(database)
    consumer = PrintingConsumer(out)
    listener = RollingListener(
        database, AfterRollingRegistry([consumer]), group="demo-printer", poll_interval=0.05, start_from="now"
    )
    out.print(
        f"recording {2 * len(TURNS)} messages in {len(TURNS)} turns for core {core_id!r}; count trigger at "
        f"{CONFIG.trigger_limit} messages, idle after {CONFIG.idle_after}, simulated clock\n"
    )
    rolls: list[RollingResult] = []
    async with listener:
        for number, (question, answer) in enumerate(TURNS, 1):
            stamp = clock.advance(TURN_GAP)
            turn = [Message(role="user", content=question), Message(role="assistant", content=answer)]
            await cores.record(core_id, turn, at=stamp)
            out.print(f"[dim]{stamp:%H:%M} turn {number:2d}[/]  user: {short(question, 90)}", highlight=False)
            result = await rolling.maybe_roll(core_id, now=stamp)
            if result is not None:
                rolls.append(result)
                await _announce(out, consumer, "count", result)
        quiet = clock.advance(CONFIG.idle_after + timedelta(minutes=1))
        out.print(f"\n[dim]{quiet:%H:%M}[/]  no message for {CONFIG.idle_after + timedelta(minutes=1)} ...")
        result = await rolling.maybe_roll(core_id, now=quiet)
        if result is not None:
            rolls.append(result)
            await _announce(out, consumer, "idle", result)
            session = await cores.session_id(core_id)
            out.print(f"  the idle roll opened a new memory session: {session}")
    out.print(f"\n{len(rolls)} roll(s) stored and delivered.\n")
    queries = SliceQueries(database)
    out.print(slices_table(await _all_slices(queries, core_id), title=f"slices of core {core_id!r}"))
    for table in stats_tables(await queries.stats(core_id, now=clock()), quiet_days=True):
        out.print(table)
    await _recall(database, core_id, rolls, clock, out)


async def _recall(
    database: MongoDatabase, core_id: str, rolls: list[RollingResult], clock: SimulatedClock, out: Console
) -> None:
    """Index the rolls as ``listen --recall`` would, then ask one question and print what recall brings."""
    indexer = RecallIndexer(database)
    for result in rolls:
        await indexer.consume(result)
    out.print(f"\nindexed {len(rolls)} slice(s) with RecallIndexer (what `listen --recall` runs)")
    found = await MemoryRecall(database, clock=clock).recall(core_id, QUESTION, limit=1, max_messages=4)
    out.print(f"[bold]recall[/] {QUESTION!r}: the best slice and its raw messages\n", highlight=False)
    print_recalled(out, found, ZoneInfo("UTC"))


async def _announce(out: Console, consumer: PrintingConsumer, trigger: str, result: RollingResult) -> None:
    piece = result.memory_slice
    out.print(
        f"[bold green]rolled[/] ({trigger} trigger): {len(result.increment_messages)} messages into slice "
        f"{piece.id} of unit {result.memory_unit.id}",
        highlight=False,
    )
    if not await consumer.wait_for(result.slice_id):
        out.print(f"  [yellow]the listener has not delivered it within {DELIVERY_TIMEOUT:g}s[/]")


async def _all_slices(queries: SliceQueries, core_id: str) -> list[SliceView]:
    views: list[SliceView] = []
    after: str | None = None
    while True:
        page = await queries.find(core_id=core_id, order="asc", limit=MAX_LIMIT, after=after)
        views += page.items
        after = page.next_cursor
        if after is None:
            return views
