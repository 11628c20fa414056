"""The optional embedder: a vector per slice, and a ``vector`` channel at recall time.

No model ships with the library (the defaults stay offline). A service that has one passes an
:class:`Embedder` to both the :class:`~.indexer.RecallIndexer` (it stores each slice's vector, of its summary
and messages) and :class:`~.service.MemoryRecall` (it embeds the query). Where the server offers MongoDB
Vector Search (a ``vectorSearch`` index named :data:`~.search.VECTOR_INDEX`, found by a probe), the vector
channel finds candidates of its own with ``$vectorSearch``; anywhere else it ranks, by cosine similarity, the
candidates the other channels found (their vectors come with them).
"""

from __future__ import annotations

import math
from collections.abc import Awaitable, Sequence
from typing import Any, Protocol, runtime_checkable

from partner_repo.callables import call
from partner_repo.errors import InvalidInput

MAX_DIMENSIONS = 8192


@runtime_checkable
class Embedder(Protocol):
    """Texts to vectors of one dimension each: a coroutine function, or a plain one (run in a worker
    thread)."""

    def __call__(
        self, texts: Sequence[str], /
    ) -> Sequence[Sequence[float]] | Awaitable[Sequence[Sequence[float]]]: ...


async def embed(embedder: Embedder, texts: Sequence[str]) -> list[list[float]]:
    """The vectors of ``texts``, checked: one per text, the same dimension, finite numbers."""
    outcome = await call(embedder, list(texts))
    vectors = [list(vector) for vector in outcome]
    if len(vectors) != len(texts):
        raise InvalidInput(
            f"embedder {embedder!r} returned {len(vectors)} vector(s) for {len(texts)} text(s)"
        )
    sizes = {len(vector) for vector in vectors}
    if len(sizes) > 1 or not sizes or not 0 < next(iter(sizes)) <= MAX_DIMENSIONS:
        raise InvalidInput(
            f"embedder {embedder!r} must return vectors of one dimension, 1 to {MAX_DIMENSIONS}"
        )
    for vector in vectors:
        if not all(
            isinstance(x, int | float) and not isinstance(x, bool) and math.isfinite(x) for x in vector
        ):
            raise InvalidInput(f"embedder {embedder!r} returned a vector that is not all finite numbers")
    return [[float(x) for x in vector] for vector in vectors]


def cosine(first: Sequence[float], second: Sequence[float]) -> float:
    """Cosine similarity (0 for vectors of different dimensions or a zero vector)."""
    if len(first) != len(second):
        return 0.0
    dot = sum(a * b for a, b in zip(first, second, strict=True))
    norms = math.sqrt(sum(a * a for a in first)) * math.sqrt(sum(b * b for b in second))
    return dot / norms if norms else 0.0


def nearest(found: dict[str, list[dict[str, Any]]], vector: list[float], limit: int) -> list[dict[str, Any]]:
    """The candidates other channels found, by cosine similarity to the query's vector (the vector channel
    without MongoDB Vector Search: it ranks, it cannot find)."""
    seen: dict[tuple[str, str], tuple[float, dict[str, Any]]] = {}
    for rows in found.values():
        for row in rows:
            stored = row.get("vector")
            if isinstance(stored, list) and stored:
                seen[(row["unit_id"], row["slice_id"])] = (cosine(vector, stored), row)
    ranked = sorted(seen.values(), key=lambda item: (-item[0], item[1]["unit_id"], item[1]["slice_id"]))
    return [row for similarity, row in ranked if similarity > 0][:limit]


__all__ = ["Embedder", "cosine", "embed", "nearest"]
