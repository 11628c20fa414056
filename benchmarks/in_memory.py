"""Section 9: how comfortable the in-memory default stays as one core's history grows.

The embedded backend is mongomock as it is: it answers a read by testing every document of the collection
and copies what it answers (an aggregation's leading ``$match`` is read the same way, through its find, so
only the matching documents are copied). It is there for the demo, for
trying the CLI and the MCP server, and for tests. This section says up to which size that stays comfortable;
it is a usability bound of the demo backend, **not a performance claim** (every latency the library claims is
measured on a server: the other sections).

One core's history, generated and indexed as section 8 does (:mod:`benchmarks.recall_scale`: the same
generator, every slice through ``RecallIndexer.consume``, built by its ``MemoryHistory``), at 100, 1,000 and
5,000 slices; at each size, in a fresh in-memory database:

- **rolls**: ``in_memory_rolls`` times, 8 messages recorded, then ``RollingService.roll`` (timed), then the
  roll indexed by ``RecallIndexer.consume`` (timed too: the index write is the operation whose cost grows
  with the history in memory);
- **recalls**: the same recall as section 8, ``MemoryRecall.recall(core, query, limit=10,
  max_messages=40)``, for each of ``in_memory_queries`` queries: latency p50 and p95;
- the collection calls of each (a wrapper of the database counts them).

The one target: a recall's p95 under 1 s at 1,000 slices.
"""

from __future__ import annotations

from collections.abc import Sequence

from benchmarks.backends import describe
from benchmarks.common import Row, Scale, SectionResult
from benchmarks.recall_points import Point, each, mean, p50, p95
from benchmarks.recall_scale import in_memory_points

TITLE = "9. The in-memory default as one core's history grows (a usability bound, not a performance claim)"
RECALL_P95_MS = 1_000.0
TARGET_SLICES = 1_000
"""The size the target is judged at (a quick run, which does not reach it, judges nothing)."""


async def run(scale: Scale) -> list[SectionResult]:
    points = await in_memory_points(scale.in_memory_sizes, scale.in_memory_queries, scale.in_memory_rolls)
    return [result(points)]


def result(points: Sequence[Point]) -> SectionResult:
    judged = next((point for point in points if point.slices == TARGET_SLICES), None)
    section = SectionResult(key="in-memory", title=TITLE, backend=describe("memory"))
    section.rows += [
        Row(
            f"recall latency p50 / p95 (limit 10, max_messages 40, {len(points[0].recall_ms)} queries)",
            each(points, lambda p: f"{_ms(p50(p.recall_ms))} / {_ms(p95(p.recall_ms))}"),
            f"p95 < {RECALL_P95_MS / 1000:.0f} s at {TARGET_SLICES:,}",
            None if judged is None else p95(judged.recall_ms) < RECALL_P95_MS,
        ),
        Row(
            f"roll latency p50 (RollingService.roll after recording 8 messages, "
            f"{len(points[0].roll_ms)} rolls)",
            each(points, lambda p: _ms(p50(p.roll_ms))),
        ),
        Row(
            "index write latency p50 (RecallIndexer.consume of that roll)",
            each(points, lambda p: _ms(p50(p.write_ms))),
        ),
        Row(
            "collection calls per recall / per roll / per index write",
            each(
                points,
                lambda p: (
                    f"{mean(p.recall_calls):.1f} / {mean(p.roll_calls):.1f} / {mean(p.write_calls):.1f}"
                ),
            ),
        ),
    ]
    section.raw = {"points": [point.as_dict() for point in points]}
    section.notes.append(
        "a usability bound of the embedded backend (mongomock: every read tests every document of its "
        "collection), for the demo, trying the CLI and the MCP server, and "
        "tests; the library's latencies are measured on a server"
    )
    return section


def _ms(milliseconds: float) -> str:
    if milliseconds >= 1_000:
        return f"{milliseconds / 1000:,.1f} s"
    return f"{milliseconds:,.0f} ms" if milliseconds >= 10 else f"{milliseconds:,.1f} ms"
