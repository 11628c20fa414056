"""Section 8: recall's costs as one core's history grows, in memory and on a server.

One core's history is generated (deterministic): slices of 8 messages of 6-20 words drawn from a Zipf
vocabulary (20,000 made-up words, exponent 1.1: a few words in nearly every slice, most in a handful), a
slice every 30 minutes, 50 slices per unit. The history grows in place (the 5,000-slice core is the
1,000-slice core with 4,000 more): units are stored with ``insert_many`` (the repository's stored form) and
every slice goes through the real ``RecallIndexer.consume`` (a ``RollingResult`` built with
``RollingResult.from_slice``, as the listener delivers it), so building the history is itself the measure of
indexing at scale. At each size:

- **index writes**: ``recall_scale_writes`` real rolls of the core (8 messages recorded, then
  ``RollingService.roll``), each indexed by ``consume``: the roll's latency, the index write's latency, its
  collection calls (in memory, through a wrapper of the database) or commands (on a server, command
  monitoring), and on a server the documents its reads examine (``explain`` executionStats);
- **recalls**: the same queries at every size (the two rarest words of a message of the first unit, two of the
  vocabulary's 50 most common words, and a filler), ``recall(limit=10, max_messages=40)``: latency p50/p95,
  collection calls or commands, and on a server the documents every read examines and its plan;
- **the largest document** of ``recall_index``.

Targets (issue 31): in memory an index write makes at most 4 collection calls and takes at most twice the roll
that produced it, no document reaches 64 KiB, recall p95 stays under 150 ms at 1,000 slices, and 10,000
slices are indexed in minutes; on a server the documents examined and the latency of a recall and of an index
write stay within 1.3x from the smallest size to the largest.
"""

from __future__ import annotations

import random
import time
from collections.abc import Sequence
from datetime import UTC, datetime, timedelta
from typing import Any

from benchmarks.backends import describe, memory_database, mongodb_uri, motor_database
from benchmarks.common import Scale, SectionResult
from benchmarks.recall_explain import (
    CallCounter,
    CommandLog,
    examined,
    largest_document,
)
from benchmarks.recall_points import Point, memory_result, server_result
from partner_repo import (
    ExtractiveSummarizer,
    MemoryCoreRepository,
    MemorySlice,
    MemoryUnit,
    Message,
    RollingResult,
    RollingService,
)
from partner_repo.mongo import RECALL_INDEX, UNITS, unit_document
from partner_repo.recall import MemoryRecall, RecallIndexer

VOCABULARY = 20_000
ZIPF = 1.1
MESSAGES_PER_SLICE = 8
SLICES_PER_UNIT = 50
UNIT_BATCH = 10
SLICE_EVERY = timedelta(minutes=30)
LIMIT = 10
MAX_MESSAGES = 40
CORE = "scale-core"
START = datetime(2024, 1, 1, tzinfo=UTC)
_SYLLABLES = [c + v for c in "bdfgklmnprstvz" for v in "aiou"]


class History:
    """A deterministic Zipf-vocabulary conversation, generated slice by slice."""

    def __init__(self, seed: int = 23) -> None:
        self._random = random.Random(seed)
        self.words = [_word(rank) for rank in range(VOCABULARY)]
        weights = [1 / (rank + 1) ** ZIPF for rank in range(VOCABULARY)]
        total = 0.0
        self._cumulative = []
        for weight in weights:
            total += weight
            self._cumulative.append(total)

    def message(self, index: int, at: datetime) -> Message:
        count = self._random.randint(6, 20)
        words = self._random.choices(self.words, cum_weights=self._cumulative, k=count)
        return Message(
            role="user" if index % 2 == 0 else "assistant",
            content=" ".join(words).capitalize() + ".",
            at=at,
        )

    def unit(self, number: int) -> tuple[MemoryUnit, list[tuple[MemorySlice, list[Message]]]]:
        """Unit ``number``: ``SLICES_PER_UNIT`` slices, the first at ``START + number * 50 * 30 min``."""
        unit_id = f"scale-u{number:05d}"
        messages: list[Message] = []
        slices: list[MemorySlice] = []
        spans: list[tuple[MemorySlice, list[Message]]] = []
        for offset in range(SLICES_PER_UNIT):
            created = START + (number * SLICES_PER_UNIT + offset + 1) * SLICE_EVERY
            span = [
                self.message(index, created - SLICE_EVERY + timedelta(minutes=2 * index))
                for index in range(MESSAGES_PER_SLICE)
            ]
            start = len(messages)
            messages.extend(span)
            summary = " ".join(m.content for m in span[:2])
            slices.append(
                MemorySlice(
                    id=f"{unit_id}-s{offset:03d}",
                    start_index=start,
                    end_index=len(messages),
                    summary=summary,
                    created_at=created,
                )
            )
            spans.append((slices[-1], span))
        unit = MemoryUnit(
            id=unit_id,
            core_id=CORE,
            conversation_messages=messages,
            slices=slices,
            updated_at=slices[-1].created_at,
            version=1,
        )
        return unit, spans


def _word(rank: int) -> str:
    parts = []
    number = rank + len(_SYLLABLES)  # at least two syllables
    while number:
        number, digit = divmod(number, len(_SYLLABLES))
        parts.append(_SYLLABLES[digit])
    return "".join(parts)


async def run(scale: Scale) -> list[SectionResult]:
    uri = mongodb_uri()
    if uri is None:
        async with memory_database() as database:
            counter = CallCounter(database)
            points = await _measure(scale, counter, scale.recall_scale_sizes, _Counted(counter))
            await database.client.drop_database(database.name)
        return [memory_result(scale, points, describe("memory"))]
    log = CommandLog()
    async with motor_database(uri, listeners=[log]) as database:
        points = await _measure(scale, database, scale.recall_scale_server_sizes, _Logged(database, log))
    return [server_result(scale, points, describe("mongodb", uri))]


class _Counted:
    """In memory: the collection calls of an operation, through the database wrapper."""

    def __init__(self, counter: CallCounter) -> None:
        self.counter = counter

    def start(self) -> None:
        self.counter.start()

    async def stop(self, point: Point, kind: str) -> None:
        getattr(point, f"{kind}_calls").append(len(self.counter.stop()))


class _Logged:
    """On a server: the commands of an operation, and the documents its reads examine."""

    def __init__(self, database: Any, log: CommandLog) -> None:
        self.database, self.log = database, log

    def start(self) -> None:
        self.log.start()

    async def stop(self, point: Point, kind: str) -> None:
        commands = self.log.stop()
        getattr(point, f"{kind}_calls").append(len(commands))
        plans = await examined(self.database, commands)
        getattr(point, f"{kind}_examined").append(sum(plan.docs_examined for plan in plans))
        if kind == "recall":
            point.counts_examined.append(sum(plan.docs_examined for plan in plans if plan.counting))
        for plan in plans:
            if plan.collection_scan:
                point.scans.add(f"{plan.command} {plan.collection}")


async def _measure(scale: Scale, database: Any, sizes: Sequence[int], meter: Any) -> list[Point]:
    history = History()
    indexer = RecallIndexer(database)
    queries = _queries(history, scale.recall_scale_queries)
    clock = _Clock(START)
    points: list[Point] = []
    built, seconds = 0, 0.0
    for size in sizes:
        started = time.perf_counter()
        built = await _grow(database, indexer, history, built, size)
        seconds += time.perf_counter() - started
        clock.now = START + (built + 2 * len(points) * scale.recall_scale_writes + 1) * SLICE_EVERY
        point = Point(slices=built, build_seconds=seconds)
        await _index_rolls(database, indexer, history, clock, scale.recall_scale_writes, point, meter)
        recall = MemoryRecall(database, clock=lambda: clock.now + timedelta(days=1))
        await recall.recall(CORE, queries[0], limit=LIMIT, max_messages=MAX_MESSAGES)  # warm-up, the probe
        for query in queries:
            meter.start()
            began = time.perf_counter()
            await recall.recall(CORE, query, limit=LIMIT, max_messages=MAX_MESSAGES)
            point.recall_ms.append((time.perf_counter() - began) * 1000)
            await meter.stop(point, "recall")
        point.largest = await largest_document(database[RECALL_INDEX])
        points.append(point)
    return points


class _Clock:
    def __init__(self, now: datetime) -> None:
        self.now = now

    def __call__(self) -> datetime:
        return self.now


async def _index_rolls(
    database: Any,
    indexer: RecallIndexer,
    history: History,
    clock: _Clock,
    rolls: int,
    point: Point,
    meter: Any,
) -> None:
    """``rolls`` real rolls of the core, each indexed: what each costs."""
    cores = MemoryCoreRepository(database)
    rolling = RollingService(database, ExtractiveSummarizer(), clock=clock)
    for _ in range(rolls):
        said = [
            history.message(index, clock.now + timedelta(minutes=index))
            for index in range(MESSAGES_PER_SLICE)
        ]
        await cores.record(CORE, said, at=clock.now)
        clock.now += SLICE_EVERY
        began = time.perf_counter()
        result = await rolling.roll(CORE, now=clock.now)
        point.roll_ms.append((time.perf_counter() - began) * 1000)
        assert result is not None
        meter.start()
        began = time.perf_counter()
        await indexer.consume(result)
        point.write_ms.append((time.perf_counter() - began) * 1000)
        await meter.stop(point, "write")


async def _grow(database: Any, indexer: RecallIndexer, history: History, built: int, size: int) -> int:
    """Store and index units until the core holds at least ``size`` slices; how many it holds. Units go in
    with ``insert_many`` (``UNIT_BATCH`` at a time), every slice through ``RecallIndexer.consume``."""
    units = []
    while built < size:
        unit, spans = history.unit(built // SLICES_PER_UNIT)
        units.append(unit_document(unit))
        if len(units) == UNIT_BATCH:
            await database[UNITS].insert_many(units)
            units = []
        for piece, span in spans:
            await indexer.consume(RollingResult.from_slice(unit.id, CORE, piece, span))
        built += SLICES_PER_UNIT
    if units:
        await database[UNITS].insert_many(units)
    return built


def _queries(history: History, count: int) -> list[str]:
    """Questions about the first unit (its 50 slices are in the core at every size): two words of one of
    its messages (the rarest), two of the vocabulary's 50 most common words, and a filler."""
    chooser = random.Random(7)
    rank = {word: number for number, word in enumerate(history.words)}
    early = [m.content for _, span in History().unit(0)[1] for m in span]
    queries = []
    for _ in range(count):
        words = [w.strip(".").lower() for w in chooser.choice(early).split()]
        rare = sorted(set(words), key=lambda w: (-rank.get(w, 0), w))[:2]
        common = chooser.sample(history.words[:50], 2)
        queries.append(f"What did we say about {rare[0]} and {rare[-1]}, the {common[0]} {common[1]} thing?")
    return queries
