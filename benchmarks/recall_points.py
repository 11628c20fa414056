"""Section 8's figures: what one history size cost (:class:`Point`), and the tables they make (the in-memory
section reads the same points)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field, replace
from typing import Any

from benchmarks.common import Row, Scale, SectionResult, percentile

EMBEDDER = "hashed-768, a fake 768-dimension embedder: hashed word vectors, summed and normalized"

WRITE_CALLS = 4
"""The most collection calls an index write may make (issue 31)."""
LARGEST = 64 * 1024
FLAT = 1.3
"""On a server: the largest size's cost over the smallest's, at most."""
ROUND_TRIPS = 4
"""The most round trips of a recall with vectors (issue 38)."""
VECTOR_BYTES = 1024 * 1024
"""The most a recall with vectors may read at the largest size (issue 38: at 10,000 slices)."""


@dataclass
class Point:
    """One history size: what its index writes and recalls cost."""

    slices: int
    build_seconds: float
    roll_ms: list[float] = field(default_factory=list)
    roll_calls: list[int] = field(default_factory=list)
    write_ms: list[float] = field(default_factory=list)
    write_calls: list[int] = field(default_factory=list)
    write_examined: list[int] = field(default_factory=list)
    recall_ms: list[float] = field(default_factory=list)
    recall_calls: list[int] = field(default_factory=list)
    recall_examined: list[int] = field(default_factory=list)
    counts_examined: list[int] = field(default_factory=list)
    """Of ``recall_examined``: what the query terms' counts examined (a server that stops an index scan at
    the count's ``$limit`` examines at most 513 each)."""
    gaps_examined: list[int] = field(default_factory=list)
    """Of ``recall_examined``: what the reads of ``_id`` and more that SecantusDB's planner scans examined
    (the messages read; mongod reads them through the ``_id`` index: the ids named at most)."""
    vector_ms: list[float] = field(default_factory=list)
    """A recall with vectors, the embedder's own time left out (:attr:`vector_embed_ms`)."""
    vector_embed_ms: list[float] = field(default_factory=list)
    vector_calls: list[int] = field(default_factory=list)
    vector_rounds: list[int] = field(default_factory=list)
    vector_bytes: list[int] = field(default_factory=list)
    """The BSON bytes of the replies (on a server) or of the documents returned (in memory)."""
    vector_examined: list[int] = field(default_factory=list)
    vector_uncovered: list[int] = field(default_factory=list)
    """Of ``vector_examined``: all but the read of the core's codes, which MongoDB answers from the
    ``core_vectors`` index alone (covered: no document examined), and SecantusDB does not."""
    vector_bounded: list[int] = field(default_factory=list)
    """Of ``vector_examined``: the reads SecantusDB bounds as mongod does, measured per read: all but the
    query terms' counts (mongod stops them at the ``$limit``: at most 513 keys each), the covered read of
    the codes (no document on mongod) and a read of ``_id`` and more planned as a collection scan (the
    ``_id`` index on mongod) (tests/emulator_gaps.py)."""
    vector_unscoped: set[str] = field(default_factory=set)
    """Commands of a recall with vectors that do not select the one core."""
    largest: int = 0
    scans: set[str] = field(default_factory=set)
    planner_gaps: set[str] = field(default_factory=set)
    """Reads planned as a collection scan by SecantusDB's planner only: ``_id`` and more, which mongod
    answers through the ``_id`` index (tests/emulator_gaps.py)."""

    def as_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["scans"] = sorted(self.scans)
        data["planner_gaps"] = sorted(self.planner_gaps)
        data["vector_unscoped"] = sorted(self.vector_unscoped)
        return data


def p50(values: Sequence[float]) -> float:
    return percentile(values, 0.5) if values else 0.0


def p95(values: Sequence[float]) -> float:
    return percentile(values, 0.95) if values else 0.0


def mean(values: Sequence[float]) -> float:
    return sum(values) / len(values) if values else 0.0


def each(points: Sequence[Point], figure: Callable[[Point], str]) -> str:
    return "; ".join(f"{point.slices:,}: {figure(point)}" for point in points)


def memory_result(scale: Scale, points: list[Point], backend: str) -> SectionResult:
    """In memory: counts only (collection calls, the largest document), never a time (the in-memory section
    times the same operations, as a usability bound of the demo backend)."""
    result = SectionResult(
        key="recall-scale", title="8. Recall cost vs history: slices per core", backend=backend
    )
    calls = max(max(point.write_calls, default=0) for point in points)
    result.rows += [
        Row(
            "index write (RecallIndexer.consume of a real roll): collection calls",
            each(points, lambda p: f"{mean(p.write_calls):.1f} (most {max(p.write_calls, default=0)})"),
            f"<= {WRITE_CALLS}",
            calls <= WRITE_CALLS,
        ),
        Row(
            "collection calls per recall (limit 10, max_messages 40) / per roll (RollingService.roll)",
            each(points, lambda p: f"{mean(p.recall_calls):.1f} / {mean(p.roll_calls):.1f}"),
        ),
        _largest(points),
    ]
    if any(point.vector_calls for point in points):
        result.rows.append(
            Row(
                f"recall with vectors ({EMBEDDER}): collection calls / bytes of the documents returned",
                each(
                    points, lambda p: f"{mean(p.vector_calls):.1f} / {mean(p.vector_bytes) / 1024:,.1f} KiB"
                ),
            )
        )
    result.raw = _raw(scale, points)
    result.notes.append(
        "in memory: counts only, through a wrapper of the database that counts each collection call; the "
        "index is built by benchmarks.recall_scale.MemoryHistory (every slice through RecallIndexer.consume)"
    )
    return result


def server_result(scale: Scale, points: list[Point], backend: str) -> SectionResult:
    result = SectionResult(
        key="recall-scale", title="8. Recall cost vs history: slices per core", backend=backend
    )
    first, last = points[0], points[-1]
    span = f"{first.slices:,} -> {last.slices:,}"

    judged = scale.name != "quick"  # 50 and 100 slices sit in one window of the index: nothing to judge

    def flat(measurement: str, figure: Callable[[Point], float], unit: str) -> Row:
        ratio = figure(last) / max(figure(first), 1e-9)
        return Row(
            measurement,
            each(points, lambda p: f"{figure(p):,.1f}{unit}") + f"; {span} = {ratio:.2f}x",
            f"<= {FLAT}x" + ("" if judged else " (not judged at the quick scale)"),
            ratio <= FLAT if judged else None,
        )

    result.rows += [
        flat("recall: documents examined (explain executionStats, every read)", _recall_examined, ""),
        flat(
            "recall: of which the query terms' counts (a $limit stops them at 513 on MongoDB)", _counting, ""
        ),
        flat(
            "recall: documents examined by the other reads (channels, core, nodes, messages), but for a "
            "read of _id and more that SecantusDB's planner scans (tests/emulator_gaps.py)",
            _others,
            "",
        ),
        flat("recall latency p50", lambda p: p50(p.recall_ms), " ms"),
        Row("recall latency p95", each(points, lambda p: f"{p95(p.recall_ms):,.1f} ms")),
        flat("index write: documents examined (explain of its reads)", _write_examined, ""),
        flat("index write latency p50 (consume of a real roll)", lambda p: p50(p.write_ms), " ms"),
        Row(
            "the roll's latency p50 (RollingService.roll, which reads and writes no recall data)",
            each(points, lambda p: f"{p50(p.roll_ms):,.1f} ms")
            + f"; {span} = {p50(last.roll_ms) / max(p50(first.roll_ms), 1e-9):.2f}x",
        ),
        Row(
            "commands per recall / per index write / per roll",
            each(
                points,
                lambda p: (
                    f"{mean(p.recall_calls):.1f} / {mean(p.write_calls):.1f} / {mean(p.roll_calls):.1f}"
                ),
            ),
        ),
        _scans_row(points),
        _largest(points),
        *(_vector_rows(points, flat, judged) if any(point.vector_calls for point in points) else []),
        Row(
            "history indexed through RecallIndexer.consume (cumulative)",
            each(points, lambda p: f"{p.build_seconds / 60:,.1f} min"),
        ),
    ]
    result.raw = _raw(scale, points)
    if any(point.vector_calls for point in points):
        result.notes += [
            "recall with vectors: MemoryRecall(embedder=...) on the same core, every slice of which was "
            f"indexed with {EMBEDDER}; the latency leaves the embedder's own time out (timed inside "
            "it); round trips: a command started while none was in flight begins one, and so does a getMore "
            "(a cursor's next batch: one more trip on its read's path) (command monitoring)",
            "documents examined with vectors: two SecantusDB gaps (tests/emulator_gaps.py) make reads "
            "examine every slice of the core there. It plans no covered read, so the read of the core's "
            "vector codes (RecallQueries.codes, covered by the core_vectors index) fetches every slice; "
            "MongoDB examines no document for it. It does not stop an index scan at a $limit, so a query "
            "term's count ({$match: {core_id, terms}}, {$limit: 513}, {$count}) fetches every slice "
            "holding the term; MongoDB stops at 513 index keys. The judged row leaves those reads out, "
            "measured read by read (explain executionStats of each), and so a read of _id and more that "
            "SecantusDB's planner scans (MongoDB: the _id index); the as-reported rows grow with the "
            "core on SecantusDB only",
        ]
    return result


def _vector_rows(points: Sequence[Point], flat: Callable[..., Row], judged: bool) -> list[Row]:
    """A recall with vectors: round trips, bytes, documents examined (as reported, and as MongoDB would
    report them), latency, and the one core every command selects."""
    last = points[-1]
    unscoped = sorted(set().union(*(point.vector_unscoped for point in points)))
    return [
        Row(
            f"recall with vectors ({EMBEDDER}): round trips (command monitoring)",
            each(points, lambda p: f"{mean(p.vector_rounds):.1f} (most {max(p.vector_rounds, default=0)})"),
            f"<= {ROUND_TRIPS}",
            max(max(point.vector_rounds, default=0) for point in points) <= ROUND_TRIPS,
        ),
        Row(
            "recall with vectors: bytes read (the replies' BSON)",
            each(
                points,
                lambda p: _kib(mean(p.vector_bytes)) + f" (most {_kib(max(p.vector_bytes, default=0))})",
            ),
            f"<= 1 MiB at {last.slices:,} slices" + ("" if judged else " (not judged at the quick scale)"),
            max(last.vector_bytes, default=0) <= VECTOR_BYTES if judged else None,
        ),
        _shown(
            flat(
                "recall with vectors: documents examined, as the server reports them (see the notes)",
                lambda p: mean(p.vector_examined),
                "",
            ),
            "(MongoDB's bounds: see the row after next)",
        ),
        _shown(
            flat(
                "recall with vectors: documents examined but for the covered read of the codes",
                lambda p: mean(p.vector_uncovered),
                "",
            ),
            "(the counts are not bounded there: see the next row)",
        ),
        _mongodb_bounds(
            flat(
                "recall with vectors: documents examined but for the reads SecantusDB does not bound (the "
                "counts' $limit, the covered code scan, _id and more; see the notes), measured per read",
                lambda p: mean(p.vector_bounded),
                "",
            )
        ),
        flat(
            "recall with vectors: latency p50, the embedder's own time left out",
            lambda p: p50(p.vector_ms),
            " ms",
        ),
        Row(
            "recall with vectors: latency p95 / the embedder's own time p50 (per recall)",
            each(points, lambda p: f"{p95(p.vector_ms):,.1f} ms / {p50(p.vector_embed_ms):,.1f} ms"),
        ),
        Row(
            "recall with vectors: commands, each selecting the one core (core_id in its filter)",
            each(points, lambda p: f"{mean(p.vector_calls):.1f}")
            + ("; every command filters on core_id" if not unscoped else f"; without: {', '.join(unscoped)}"),
            "one core each",
            not unscoped,
        ),
    ]


def _scans_row(points: Sequence[Point]) -> Row:
    """The reads planned as a collection scan: the library's fail the target; SecantusDB's planner gap
    (``_id`` and more, which mongod answers through the ``_id`` index) is listed, not judged."""
    scans = sorted(set().union(*(p.scans for p in points)))
    gaps = sorted(set().union(*(p.planner_gaps for p in points)))
    value = "; ".join(scans) or "none"
    if gaps:
        value += (" but " if not scans else "; and ") + "; ".join(gaps)
        value += " (SecantusDB's planner: _id and more, which MongoDB reads through the _id index; "
        value += "tests/emulator_gaps.py)"
    return Row("reads planned as a collection scan (explain)", value, "none", not scans)


def _shown(row: Row, beside: str) -> Row:
    """``row``'s figures shown beside ``beside``, judged by nothing (a SecantusDB gap makes them grow)."""
    return Row(row.measurement, row.value, beside)


def _mongodb_bounds(row: Row) -> Row:
    """``row``'s target, saying what MongoDB examines for the reads left out."""
    target = f"{row.target}; MongoDB: at most 513 keys a count, no document for the covered code scan"
    return replace(row, target=target)


def _kib(size: float) -> str:
    return f"{size / 1024:,.1f} KiB"


def _recall_examined(point: Point) -> float:
    return mean(point.recall_examined)


def _counting(point: Point) -> float:
    return mean(point.counts_examined)


def _others(point: Point) -> float:
    return mean(point.recall_examined) - mean(point.counts_examined) - mean(point.gaps_examined)


def _write_examined(point: Point) -> float:
    return mean(point.write_examined)


def _largest(points: Sequence[Point]) -> Row:
    return Row(
        "largest document of recall_index (BSON)",
        each(points, lambda p: f"{p.largest / 1024:,.1f} KiB"),
        "< 64 KiB at every size",
        all(point.largest < LARGEST for point in points),
    )


def _raw(scale: Scale, points: Sequence[Point]) -> dict[str, Any]:
    return {
        "queries": scale.recall_scale_queries,
        "writes": scale.recall_scale_writes,
        "points": [point.as_dict() for point in points],
    }


__all__ = ["Point", "each", "mean", "memory_result", "p50", "p95", "server_result"]
