"""Section 8: a recall's cost as a core's history grows: 100, 1,000 and 10,000 indexed slices per core.

One core's history is generated (deterministic): slices of 8 messages of 6-20 words drawn from a Zipf
vocabulary (20,000 made-up words, exponent 1.1: a few words in nearly every slice, most in a handful), a
slice every 30 minutes, 50 slices per unit. The history grows in place (the 1,000-slice core is the
100-slice core with 900 more). Building it takes the bulk path: units are stored with ``insert_many`` (the
repository's stored form) and every slice goes through the real ``RecallIndexer`` (a ``RollingResult``
built with ``RollingResult.from_slice``, as the listener delivers it) into :mod:`benchmarks.recall_staging`,
which writes the index the indexer computed in bulk (the smoke test checks it writes what ``consume``
writes). At each size the same queries (the two rarest words of a message of the first unit, two of the
vocabulary's most common words, and a filler) are asked with ``recall(limit=10, max_messages=40)``:

- **latency** p50 / p95 (wall time of the call, after one untimed warm-up query);
- **round trips**: on a server (``MONGODB_URI`` / ``--uri``) the commands the driver sent, counted with
  PyMongo's command monitoring; on the in-memory backend there is no wire, so the driver calls the recall
  made (an ``aggregate`` each) are counted through a wrapper of the database;
- **bytes**: on a server the BSON bytes of the commands and of the server's replies (command monitoring);
  in memory the BSON bytes of the documents the calls returned (a reply without its envelope);
- **documents matched**: what the first ``$match`` of each aggregation selects (``count_documents``), which
  is what a server with the right indexes reads; on a server, each aggregation's plan (``explain``).

The claim (issue 23): flat within 2x from 1,000 to 10,000 slices. Round trips (three) and bytes (a bounded
number of candidates, only the marks of the query's terms, only the chosen messages) are flat by
construction. Latency depends on the backend: mongomock has no indexes and copies every document a stage
reads, so in memory it grows with the collections and says nothing about a server; a server that answers
an aggregation with a collection scan (the ``explain`` row says so) grows the same way.
"""

from __future__ import annotations

import random
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from functools import partial
from typing import Any

from benchmarks.backends import describe, memory_database, mongodb_uri, motor_database
from benchmarks.common import Row, Scale, SectionResult, percentile
from benchmarks.monitor import WireMeter
from benchmarks.recall_explain import CallCounter, explain_plans, matched
from benchmarks.recall_staging import StagedIndex
from partner_repo import MemorySlice, MemoryUnit, Message, RollingResult
from partner_repo.mongo._indexes import UNITS
from partner_repo.mongo._storage import unit_document
from partner_repo.recall import MemoryRecall

FLAT_TARGET = 2.0
VOCABULARY = 20_000
ZIPF = 1.1
MESSAGES_PER_SLICE = 8
SLICES_PER_UNIT = 50
UNIT_BATCH = 10
SLICE_EVERY = timedelta(minutes=30)
LIMIT = 10
MAX_MESSAGES = 40
MATCH_SAMPLE = 3
"""Queries whose matched documents are counted at each size (a count scans on a backend without indexes)."""
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


@dataclass
class Point:
    """One size: what its recalls cost."""

    slices: int
    build_seconds: float
    latencies_ms: list[float] = field(default_factory=list)
    round_trips: list[int] = field(default_factory=list)
    request_bytes: list[int] = field(default_factory=list)
    reply_bytes: list[int] = field(default_factory=list)
    commands: list[str] = field(default_factory=list)
    matched: dict[str, float] = field(default_factory=dict)
    plans: dict[str, Any] = field(default_factory=dict)

    @property
    def total_bytes(self) -> float:
        return _mean(self.request_bytes) + _mean(self.reply_bytes)

    def as_dict(self) -> dict[str, Any]:
        return {
            "slices": self.slices,
            "build_seconds": self.build_seconds,
            "latency_ms": {"p50": self.p50, "p95": percentile(self.latencies_ms, 0.95)},
            "round_trips": _mean(self.round_trips),
            "request_bytes": _mean(self.request_bytes),
            "reply_bytes": _mean(self.reply_bytes),
            "commands": self.commands,
            "matched": self.matched,
            "plans": self.plans,
            "latencies_ms": self.latencies_ms,
        }

    @property
    def p50(self) -> float:
        return percentile(self.latencies_ms, 0.5)


async def run(scale: Scale) -> list[SectionResult]:
    uri = mongodb_uri()
    if uri is None:
        async with memory_database() as database:
            counter = CallCounter(database)
            points = await _measure(scale, database, counter, _counted(counter))
            await database.client.drop_database(database.name)
        return [_result(scale, points, describe("memory"), server=False)]
    meter = WireMeter()
    async with motor_database(uri, listeners=[meter]) as database:
        points = await _measure(scale, database, database, _metered(meter), explain=True)
    return [_result(scale, points, describe("mongodb", uri), server=True)]


Meter = Callable[[Callable[[], Awaitable[Any]]], Awaitable[tuple[int, int, int, list[str]]]]
"""Run one recall and say what it cost: round trips, request bytes, reply bytes, command names."""


def _counted(counter: CallCounter) -> Meter:
    async def measure(call: Callable[[], Awaitable[Any]]) -> tuple[int, int, int, list[str]]:
        counter.start()
        await call()
        calls = counter.stop()
        return len(calls), 0, sum(size for _, size in calls), [name for name, _ in calls]

    return measure


def _metered(meter: WireMeter) -> Meter:
    async def measure(call: Callable[[], Awaitable[Any]]) -> tuple[int, int, int, list[str]]:
        meter.start()
        await call()
        cost = meter.stop()
        return cost.command_count, cost.request_bytes, cost.reply_bytes, list(cost.commands)

    return measure


async def _measure(
    scale: Scale, database: Any, recalling: Any, meter: Meter, *, explain: bool = False
) -> list[Point]:
    history = History()
    staged = StagedIndex(database)
    recall = MemoryRecall(recalling, clock=lambda: START + timedelta(days=400))
    queries = _queries(history, scale.recall_scale_queries)
    points: list[Point] = []
    built = 0
    seconds = 0.0
    for size in scale.recall_scale_sizes:
        started = time.perf_counter()
        built = await _grow(database, staged, history, built, size)
        seconds += time.perf_counter() - started
        point = Point(slices=built, build_seconds=seconds)
        await recall.recall(CORE, queries[0], limit=LIMIT, max_messages=MAX_MESSAGES)  # warm-up
        for query in queries:
            began = time.perf_counter()
            trips, sent, received, commands = await meter(
                partial(recall.recall, CORE, query, limit=LIMIT, max_messages=MAX_MESSAGES)
            )
            point.latencies_ms.append((time.perf_counter() - began) * 1000)
            point.round_trips.append(trips)
            point.request_bytes.append(sent)
            point.reply_bytes.append(received)
            point.commands = commands
        counts = [await matched(database, q, LIMIT, MAX_MESSAGES, CORE) for q in queries[:MATCH_SAMPLE]]
        point.matched = {name: sum(c.get(name, 0) for c in counts) / len(counts) for name in counts[0]}
        if explain:
            point.plans = await explain_plans(database, queries[0], LIMIT, MAX_MESSAGES, CORE)
        points.append(point)
    return points


async def _grow(database: Any, staged: StagedIndex, history: History, built: int, size: int) -> int:
    """Store and index units until the core holds at least ``size`` slices; how many it holds. Units go in
    with ``insert_many`` (``UNIT_BATCH`` at a time), slices through the indexer into :class:`StagedIndex`,
    written in bulk at the end."""
    units = []
    while built < size:
        unit, spans = history.unit(built // SLICES_PER_UNIT)
        units.append(unit_document(unit))
        for piece, span in spans:
            await staged.indexer.consume(RollingResult.from_slice(unit.id, CORE, piece, span))
        built += SLICES_PER_UNIT
        if len(units) == UNIT_BATCH:
            await database[UNITS].insert_many(units)
            units = []
    if units:
        await database[UNITS].insert_many(units)
    await staged.flush(database)
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


def _result(scale: Scale, points: list[Point], backend: str, *, server: bool) -> SectionResult:
    result = SectionResult(
        key="recall-scale", title="8. Recall cost vs history: slices per core", backend=backend
    )
    last, before = points[-1], points[-2] if len(points) > 1 else points[-1]
    span = f"{before.slices:,} -> {last.slices:,}"
    latency = last.p50 / max(before.p50, 1e-9)
    trips = _mean(last.round_trips) / max(_mean(before.round_trips), 1e-9)
    sizes = last.total_bytes / max(before.total_bytes, 1e-9)
    result.rows.append(
        Row(
            f"recall latency p50 / p95 (limit {LIMIT}, max_messages {MAX_MESSAGES}, "
            f"{len(last.latencies_ms)} queries)",
            "; ".join(
                f"{p.slices:,}: {p.p50:,.1f} / {percentile(p.latencies_ms, 0.95):,.1f} ms" for p in points
            )
            + f"; p50 {span} = {latency:.2f}x",
            f"flat <= {FLAT_TARGET:.0f}x" if server else "backend-bound: mongomock scans",
            latency <= FLAT_TARGET if server else None,
        )
    )
    result.rows.append(
        Row(
            ("round trips (commands sent)" if server else "round trips (driver calls; in memory, no wire)")
            + " per recall",
            "; ".join(f"{p.slices:,}: {_mean(p.round_trips):.2f}" for p in points)
            + f" ({' + '.join(last.commands)}); {span} = {trips:.2f}x",
            f"flat <= {FLAT_TARGET:.0f}x",
            trips <= FLAT_TARGET,
        )
    )
    result.rows.append(
        Row(
            "bytes per recall, "
            + (
                "sent + received (command monitoring)"
                if server
                else "of the documents returned (no envelope)"
            ),
            "; ".join(
                f"{p.slices:,}: {_mean(p.request_bytes):,.0f} + {_mean(p.reply_bytes):,.0f} B"
                if server
                else f"{p.slices:,}: {_mean(p.reply_bytes):,.0f} B"
                for p in points
            )
            + f"; {span} = {sizes:.2f}x",
            f"flat <= {FLAT_TARGET:.0f}x",
            sizes <= FLAT_TARGET,
        )
    )
    names = list(last.matched)
    result.rows.append(
        Row(
            "documents each aggregation's $match selects, per recall (what an indexed server reads): "
            + " / ".join(names),
            "; ".join(
                f"{p.slices:,}: " + " / ".join(f"{p.matched.get(n, 0):,.0f}" for n in names) for p in points
            ),
        )
    )
    if server:
        result.rows.append(
            Row(
                f"plans at {last.slices:,} slices (explain executionStats): stage, documents examined",
                "; ".join(_plan_text(name, plan) for name, plan in last.plans.items()),
            )
        )
    result.rows.append(
        Row(
            "history built (units insert_many, slices through RecallIndexer, index written in bulk)",
            "; ".join(f"{p.slices:,}: {p.build_seconds:,.1f} s" for p in points) + " (cumulative)",
        )
    )
    result.raw = {
        "queries": scale.recall_scale_queries,
        "vocabulary": VOCABULARY,
        "zipf": ZIPF,
        "messages_per_slice": MESSAGES_PER_SLICE,
        "slices_per_unit": SLICES_PER_UNIT,
        "limit": LIMIT,
        "max_messages": MAX_MESSAGES,
        "points": [p.as_dict() for p in points],
    }
    if server:
        scanned = sorted(name for name, plan in last.plans.items() if plan.get("collection_scan"))
        if scanned:
            result.notes.append(
                f"the server answered {', '.join(scanned)} with a collection scan (explain): its latency "
                "grows with the collections, whatever the recall asks for"
            )
    else:
        result.notes.append(
            "in memory: mongomock has no indexes and copies what each stage reads, so latency grows with the "
            "collections; round trips and bytes are what a server would be asked and answer"
        )
    return result


def _plan_text(name: str, plan: dict[str, Any]) -> str:
    if "error" in plan:
        return f"{name}: no explain ({plan['error']})"
    how = " + ".join(plan["stages"]) + (f" ({', '.join(plan['indexes'])})" if plan["indexes"] else "")
    return f"{name}: {how}, {plan['docs_examined']:,} documents examined, {plan['returned']:,} returned"


def _mean(values: Sequence[float]) -> float:
    return sum(values) / len(values) if values else 0.0
