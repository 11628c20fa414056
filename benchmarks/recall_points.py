"""Section 8's figures: what one history size cost (:class:`Point`), and the tables they make (the in-memory
section reads the same points)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

from benchmarks.common import Row, Scale, SectionResult, percentile

WRITE_CALLS = 4
"""The most collection calls an index write may make (issue 31)."""
LARGEST = 64 * 1024
FLAT = 1.3
"""On a server: the largest size's cost over the smallest's, at most."""


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
    largest: int = 0
    scans: set[str] = field(default_factory=set)

    def as_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["scans"] = sorted(self.scans)
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
        flat("recall: documents examined by the other reads (channels, core, nodes, messages)", _others, ""),
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
        Row(
            "reads planned as a collection scan (explain)",
            "; ".join(sorted(set().union(*(p.scans for p in points)))) or "none",
            "none",
            not any(p.scans for p in points),
        ),
        _largest(points),
        Row(
            "history indexed through RecallIndexer.consume (cumulative)",
            each(points, lambda p: f"{p.build_seconds / 60:,.1f} min"),
        ),
    ]
    result.raw = _raw(scale, points)
    return result


def _recall_examined(point: Point) -> float:
    return mean(point.recall_examined)


def _counting(point: Point) -> float:
    return mean(point.counts_examined)


def _others(point: Point) -> float:
    return mean(point.recall_examined) - mean(point.counts_examined)


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
