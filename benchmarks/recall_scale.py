"""Section 8: recall's costs as one core's history grows: measured on a server, counted in memory.

One core's history is generated (deterministic): slices of 8 messages of 6-20 words drawn from a Zipf
vocabulary (20,000 made-up words, exponent 1.1: a few words in nearly every slice, most in a handful), a
slice every 30 minutes, 50 slices per unit. The history grows in place (the 10,000-slice core is the
1,000-slice core with 9,000 more): units are stored with ``insert_many`` (the repository's stored form) and
every slice goes through the real ``RecallIndexer.consume`` (a ``RollingResult`` built with
``RollingResult.from_slice``, as the listener delivers it), so building the history is itself the measure of
indexing at scale. At each size:

- **index writes**: ``recall_scale_writes`` real rolls of the core (8 messages recorded, then
  ``RollingService.roll``), each indexed by ``consume``: the roll's latency, the index write's latency, its
  commands (command monitoring) and the documents its reads examine (``explain`` executionStats);
- **recalls**: the same queries at every size (the two rarest words of a message of the first unit, two of the
  vocabulary's 50 most common words, and a filler), ``recall(limit=10, max_messages=40)``: latency p50/p95,
  commands, the documents every read examines and its plan;
- **recalls with vectors** (issue 38): every slice is indexed with :class:`Hashed` (``hashed-768``, a fake
  deterministic embedder of 768 dimensions, all-mpnet-base-v2's: each word a hashed vector, a text the
  normalized sum of its words'), and the same queries go to ``MemoryRecall(embedder=...)``: round trips
  (command monitoring: at most 4), the bytes of the replies (at most 1 MiB at 10,000 slices), the documents
  every read examines (as the server reports them, and without the covered read of the core's codes, which
  MongoDB answers from an index alone and SecantusDB does not), the latency without the embedder's own time
  (within 1.3x), and that every command selects the one core;
- **the largest document** of ``recall_index``.

That is on a server: ``--uri``, ``MONGODB_URI``, or the SecantusDB ``python -m benchmarks`` starts. Targets
(issue 31): the documents examined and the latency of a recall and of an index write stay within 1.3x from the
smallest size to the largest, no read is planned as a collection scan, no document reaches 64 KiB.

In memory (``--no-server``) the same operations are counted, never timed: the collection calls of an index
write (at most 4), of a roll and of a recall, and the largest document. mongomock copies a whole collection
to answer an aggregation, so there the history is built by :class:`MemoryHistory`; how long the operations
take in memory is the in-memory section's (a recall with vectors: its calls and the bytes of the documents
returned are counted there too) (:mod:`benchmarks.in_memory`), a usability bound of the demo
backend.
"""

from __future__ import annotations

import hashlib
import math
import random
import re
import time
from array import array
from collections.abc import Sequence
from datetime import UTC, datetime, timedelta
from typing import Any

from benchmarks.backends import describe, memory_database, mongodb_uri, motor_database
from benchmarks.common import Scale, SectionResult
from benchmarks.recall_explain import CallCounter, CommandLog, Plan, examined, largest_document, unscoped
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
from partner_repo.recall._keys import NODE, SLICE
from partner_repo.recall._store import WINDOW

VOCABULARY = 20_000
ZIPF = 1.1
MESSAGES_PER_SLICE = 8
SLICES_PER_UNIT = 50
UNIT_BATCH = 10
SLICE_EVERY = timedelta(minutes=30)
LIMIT = 10
MAX_MESSAGES = 40
CORE = "scale-core"
WARM_UP = "hello"
START = datetime(2024, 1, 1, tzinfo=UTC)
_SYLLABLES = [c + v for c in "bdfgklmnprstvz" for v in "aiou"]
DIMENSIONS = 768
_WORD = re.compile(r"\w+")


class Hashed:
    """A fake embedder for measuring cost, not quality: each word's vector is the SHAKE-128 digest of the
    word (768 bytes, read as signed values), a text's the normalized sum of its words'. Deterministic, no
    model to install, and as wide as all-mpnet-base-v2's vectors, so what recall stores and reads is the
    size a real model's would be. :attr:`seconds` is its own time, which the latencies leave out."""

    name = "hashed-768"

    def __init__(self) -> None:
        self.seconds = 0.0

    def __call__(self, texts: Sequence[str]) -> list[list[float]]:
        began = time.perf_counter()
        vectors = [self._vector(text) for text in texts]
        self.seconds += time.perf_counter() - began
        return vectors

    @staticmethod
    def _vector(text: str) -> list[float]:
        words = _WORD.findall(text.lower()) or [""]
        rows = [array("b", hashlib.shake_128(word.encode()).digest(DIMENSIONS)) for word in words]
        summed = [float(sum(column)) for column in zip(*rows, strict=True)]
        norm = math.sqrt(sum(value * value for value in summed)) or 1.0
        return [value / norm for value in summed]


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
        points = await in_memory_points(
            scale.recall_scale_sizes, scale.recall_scale_queries, scale.recall_scale_writes, Hashed()
        )
        return [memory_result(scale, points, describe("memory"))]
    log = CommandLog()
    async with motor_database(uri, listeners=[log]) as database:
        points = await _on_server(scale, database, log, Hashed())
    return [server_result(scale, points, describe("mongodb", uri))]


async def _on_server(scale: Scale, database: Any, log: CommandLog, embedder: Hashed) -> list[Point]:
    """The history grown in place on the server (every slice with ``embedder``'s vectors), measured at each
    of ``recall_scale_server_sizes``."""
    history = History()
    indexer = RecallIndexer(database, embedder=embedder)
    asked = queries(history, scale.recall_scale_queries)
    points: list[Point] = []
    built, seconds = 0, 0.0
    for size in scale.recall_scale_server_sizes:
        started = time.perf_counter()
        built = await grow(database, indexer, history, built, size)
        seconds += time.perf_counter() - started
        clock = Clock(after(built, len(points), scale.recall_scale_writes))
        point = Point(slices=built, build_seconds=seconds)
        await measure(
            database,
            history,
            point,
            asked,
            scale.recall_scale_writes,
            _Logged(database, log),
            clock,
            embedder,
        )
        points.append(point)
    return points


async def in_memory_points(
    sizes: Sequence[int], count: int, writes: int, embedder: Hashed | None = None
) -> list[Point]:
    """At each of ``sizes``, one core's history in a fresh in-memory database (built by
    :class:`MemoryHistory`, with ``embedder``'s vectors when given), measured by :func:`measure` with its
    collection calls counted: the figures of this section in memory and of the in-memory section."""
    points: list[Point] = []
    async with memory_database() as scratch:
        history = MemoryHistory(scratch, embedder)
        asked = queries(history.history, count)
        seconds = 0.0
        for size in sizes:
            started = time.perf_counter()
            await history.grow(size)
            seconds += time.perf_counter() - started
            async with memory_database() as database:
                await history.copy_into(database)
                counter = CallCounter(database)
                point = Point(slices=history.slices, build_seconds=seconds)
                clock = Clock(after(history.slices, len(points), writes))
                await measure(
                    counter, history.history, point, asked, writes, _Counted(counter), clock, embedder
                )
                points.append(point)
                await database.client.drop_database(database.name)
        await scratch.client.drop_database(scratch.name)
    return points


class MemoryHistory:
    """One core's history for the in-memory backend, every slice indexed through the real
    ``RecallIndexer.consume``, in minutes where indexing it in place would take hours.

    mongomock answers an aggregation by copying every document of the collection first, so an index write's
    window read (the core's last ``WINDOW`` slices, ``RecallStore.window``) costs O(history) in memory:
    about 0.5 s a slice at 300 slices, and indexing 5,000 one at a time would take hours. Here each slice is
    indexed on a scratch database that holds only what an index write reads: the core's document (its
    counters) and its last ``WINDOW`` slices. After each write the older slices and the topic nodes move out:
    no index write reads a node (a new slice's nodes are upserted with ``$inc``), so a node moved out and
    written again is two documents whose counters add up, and :meth:`copy_into` adds them. The units and the
    index it writes into a database are those indexing every slice there would have left.
    """

    def __init__(self, scratch: Any, embedder: Hashed | None = None) -> None:
        self.history = History()
        self.slices = 0
        self._index = scratch[RECALL_INDEX]
        self._indexer = RecallIndexer(scratch, embedder=embedder)
        self._units: list[dict[str, Any]] = []
        self._slices: list[dict[str, Any]] = []
        self._nodes: dict[str, dict[str, Any]] = {}

    async def grow(self, size: int) -> None:
        """Generate and index whole units until the core holds at least ``size`` slices."""
        while self.slices < size:
            unit, spans = self.history.unit(self.slices // SLICES_PER_UNIT)
            self._units.append(unit_document(unit))
            for piece, span in spans:
                await self._indexer.consume(RollingResult.from_slice(unit.id, CORE, piece, span))
                self.slices += 1
                await self._move_out()

    async def _move_out(self) -> None:
        """Move what the next index write does not read out of the scratch database."""
        older = {"$or": [{"kind": NODE}, {"kind": SLICE, "seq": {"$lte": self.slices - WINDOW}}]}
        moved = await self._index.find(older).to_list(None)
        for document in moved:
            if document["kind"] == SLICE:
                self._slices.append(document)
            elif document["_id"] in self._nodes:
                self._nodes[document["_id"]]["slices"] += document["slices"]
            else:
                self._nodes[document["_id"]] = document
        if moved:
            await self._index.delete_many({"_id": {"$in": [document["_id"] for document in moved]}})

    async def copy_into(self, database: Any) -> None:
        """Store the units and the whole index (what was moved out, and what the scratch database holds)."""
        for start in range(0, len(self._units), UNIT_BATCH):
            await database[UNITS].insert_many(self._units[start : start + UNIT_BATCH])
        held = await self._index.find({}).to_list(None)
        await database[RECALL_INDEX].insert_many([*self._slices, *self._nodes.values(), *held])


def after(built: int, measured: int, writes: int) -> datetime:
    """The clock of the rolls measured at a size: past the history's last slice and the rolls measured at
    the ``measured`` sizes before (two slice periods a roll)."""
    return START + (built + 2 * measured * writes + 1) * SLICE_EVERY


async def measure(
    database: Any,
    history: History,
    point: Point,
    asked: Sequence[str],
    writes: int,
    meter: Any,
    clock: Clock,
    embedder: Hashed | None = None,
) -> None:
    """At one size: ``writes`` real rolls of the core, each indexed (with ``embedder``'s vectors when
    given), then a recall of each of ``asked`` (again with vectors, with ``embedder``) and the largest
    document of the index, into ``point``."""
    indexer = RecallIndexer(database, embedder=embedder)
    await _index_rolls(database, indexer, history, clock, writes, point, meter)
    recall = MemoryRecall(database, clock=lambda: clock.now + timedelta(days=1))
    # warm-up: the first recall asks which search indexes the server offers; one word keeps it short in memory
    await recall.recall(CORE, WARM_UP, limit=LIMIT, max_messages=MAX_MESSAGES)
    for query in asked:
        meter.start()
        began = time.perf_counter()
        await recall.recall(CORE, query, limit=LIMIT, max_messages=MAX_MESSAGES)
        point.recall_ms.append((time.perf_counter() - began) * 1000)
        await meter.stop(point, "recall")
    if embedder is not None:
        await _vector_recalls(database, point, asked, meter, clock, embedder)
    point.largest = await largest_document(database[RECALL_INDEX])


async def _vector_recalls(
    database: Any, point: Point, asked: Sequence[str], meter: Any, clock: Clock, embedder: Hashed
) -> None:
    """The same queries with the embedder: the latency without the embedder's own time (timed inside it,
    so what is left is recall's)."""
    recall = MemoryRecall(database, clock=lambda: clock.now + timedelta(days=1), embedder=embedder)
    await recall.recall(CORE, WARM_UP, limit=LIMIT, max_messages=MAX_MESSAGES)
    for query in asked:
        meter.start()
        spent = embedder.seconds
        began = time.perf_counter()
        await recall.recall(CORE, query, limit=LIMIT, max_messages=MAX_MESSAGES)
        elapsed = time.perf_counter() - began
        embedded = embedder.seconds - spent
        point.vector_ms.append((elapsed - embedded) * 1000)
        point.vector_embed_ms.append(embedded * 1000)
        await meter.stop(point, "vector")


class _Counted:
    """In memory: the collection calls of an operation, through the database wrapper."""

    def __init__(self, counter: CallCounter) -> None:
        self.counter = counter

    def start(self) -> None:
        self.counter.start()

    async def stop(self, point: Point, kind: str) -> None:
        getattr(point, f"{kind}_calls").append(len(self.counter.stop()))
        if kind == "vector":
            point.vector_bytes.append(self.counter.returned)


class _Logged:
    """On a server: the commands of an operation, and the documents the reads of an index write or a recall
    examine."""

    def __init__(self, database: Any, log: CommandLog) -> None:
        self.database, self.log = database, log

    def start(self) -> None:
        self.log.start()

    async def stop(self, point: Point, kind: str) -> None:
        commands = self.log.stop()
        getattr(point, f"{kind}_calls").append(len(commands))
        if kind == "vector":
            point.vector_rounds.append(self.log.rounds)
            point.vector_bytes.append(self.log.reply_bytes)
            point.vector_unscoped.update(unscoped(commands, CORE))
            plans = await examined(self.database, commands)
            point.vector_examined.append(sum(plan.docs_examined for plan in plans))
            point.vector_uncovered.append(sum(plan.docs_examined for plan in plans if not plan.codes))
            point.vector_bounded.append(sum(plan.docs_examined for plan in plans if _bounded(plan)))
            _scans(point, plans, kind)
            return
        if kind == "roll":
            return
        plans = await examined(self.database, commands)
        getattr(point, f"{kind}_examined").append(sum(plan.docs_examined for plan in plans))
        if kind == "recall":
            point.counts_examined.append(sum(plan.docs_examined for plan in plans if plan.counting))
            point.gaps_examined.append(
                sum(plan.docs_examined for plan in plans if plan.collection_scan and plan.id_and_more)
            )
        _scans(point, plans, kind)


OPERATIONS = {"write": "the index write's", "recall": "recall's", "vector": "recall's (with vectors)"}


def _bounded(plan: Plan) -> bool:
    """Whether SecantusDB bounds what ``plan``'s read examines as mongod does: not a query term's count
    (mongod stops its index scan at the ``$limit``: at most 513 keys), not the covered read of the codes
    (no document on mongod), not a read of ``_id`` and more planned as a collection scan (mongod uses the
    ``_id`` index: the ids named at most); tests/emulator_gaps.py lists the three."""
    return not (plan.counting or plan.codes or (plan.collection_scan and plan.id_and_more))


def _scans(point: Point, plans: Sequence[Plan], kind: str) -> None:
    """The reads of ``plans`` planned as a collection scan: SecantusDB's planner gap (``_id`` and more,
    tests/emulator_gaps.py) apart from the rest."""
    suffix = " (recall with vectors)" if kind == "vector" else ""
    for plan in plans:
        if not plan.collection_scan:
            continue
        if plan.id_and_more:
            point.planner_gaps.add(f"{OPERATIONS[kind]} {plan.id_and_more}")
        else:
            point.scans.add(f"{plan.command} {plan.collection}{suffix}")


class Clock:
    def __init__(self, now: datetime) -> None:
        self.now = now

    def __call__(self) -> datetime:
        return self.now


async def _index_rolls(
    database: Any,
    indexer: RecallIndexer,
    history: History,
    clock: Clock,
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
        meter.start()
        began = time.perf_counter()
        result = await rolling.roll(CORE, now=clock.now)
        point.roll_ms.append((time.perf_counter() - began) * 1000)
        await meter.stop(point, "roll")
        assert result is not None
        meter.start()
        began = time.perf_counter()
        await indexer.consume(result)
        point.write_ms.append((time.perf_counter() - began) * 1000)
        await meter.stop(point, "write")


async def grow(database: Any, indexer: RecallIndexer, history: History, built: int, size: int) -> int:
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


def queries(history: History, count: int) -> list[str]:
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
