"""MongoDB Search as extra recall channels, where the server has it: found by a probe, never assumed.

Atlas (and servers running ``mongot``) answer ``$listSearchIndexes``; others refuse it. The probe asks once
per :class:`~.service.MemoryRecall` and looks for two indexes on ``recall_index`` by name:

- :data:`TEXT_INDEX` (type ``search``): a ``search`` channel, ``$search`` over the slices' summaries;
- :data:`VECTOR_INDEX` (type ``vectorSearch``, on ``vector`` with ``core_id``, ``vtag``, ``began_at`` and
  ``ended_at`` as filter fields): the ``vector`` channel finds candidates with ``$vectorSearch`` (an embedder
  is needed) instead of the exact search over the core's codes.

Each runs as an aggregation of its own, sent at the same time as the counts, so recall still waits for one
round trip before it reads the other channels' candidates. The core, the embedder's tag and the time window
are filters *inside* each stage (applied before ranking, as everywhere in recall; with ``core_id`` a filter
of the index, a query stays on one core, and on one shard). Without them, the text channel and the exact
vector search do the work (:mod:`.vectors`); nothing else changes. ``docs/recall.md`` has both index
definitions.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from partner_repo.mongo import PyMongoError, driver, library_logger
from partner_repo.recall._vectors import int8_vector

logger = library_logger("partner_repo.recall.search")

TEXT_INDEX = "recall_text"
VECTOR_INDEX = "recall_vector"


@dataclass(frozen=True)
class SearchSupport:
    """Which MongoDB Search indexes recall may use (False: none, the server has no MongoDB Search)."""

    text: bool = False
    vector: bool = False


async def probe(collection: Any) -> SearchSupport:
    """Ask the server for the search indexes of ``collection``; none when it refuses or has none ready."""
    try:
        rows = await driver.aggregate_list(collection, [{"$listSearchIndexes": {}}])
    except (PyMongoError, NotImplementedError) as exc:
        logger.debug("no MongoDB Search on %s: %s", getattr(collection, "name", collection), exc)
        return SearchSupport()
    ready = {
        (row.get("name"), row.get("type", "search"))
        for row in rows
        if row.get("queryable", row.get("status") in (None, "READY"))
    }
    return SearchSupport(text=(TEXT_INDEX, "search") in ready, vector=(VECTOR_INDEX, "vectorSearch") in ready)


def _window(since: datetime | None, until: datetime | None) -> dict[str, Any]:
    window: dict[str, Any] = {}
    if since is not None:
        window["ended_at"] = {"$gte": since}
    if until is not None:
        window["began_at"] = {"$lt": until}
    return window


def vector_pipeline(
    core_id: str,
    vector: list[float],
    *,
    tag: str,
    since: datetime | None,
    until: datetime | None,
    limit: int,
    projection: dict[str, Any],
) -> list[dict[str, Any]]:
    """``$vectorSearch`` for the ``limit`` slices of ``core_id`` nearest to ``vector`` among those with
    vectors of embedder ``tag``, filtered first."""
    stage: dict[str, Any] = {
        "index": VECTOR_INDEX,
        "path": "vector",
        # the stored vectors' type: MongoDB compares a query only with vectors of its own type and finds
        # nothing, silently, for doubles against int8 vectors
        "queryVector": int8_vector(vector),
        "numCandidates": 10 * limit,
        "limit": limit,
        "filter": {"core_id": {"$eq": core_id}, "vtag": {"$eq": tag}, **_window(since, until)},
    }
    return [{"$vectorSearch": stage}, {"$project": projection}]


def text_pipeline(
    core_id: str,
    query: str,
    *,
    since: datetime | None,
    until: datetime | None,
    limit: int,
    projection: dict[str, Any],
) -> list[dict[str, Any]]:
    """``$search`` over the summaries of ``core_id``'s slices, the core and the window as filters."""
    filters: list[dict[str, Any]] = [{"equals": {"path": "core_id", "value": core_id}}]
    window = _window(since, until)
    if "ended_at" in window:
        filters.append({"range": {"path": "ended_at", "gte": window["ended_at"]["$gte"]}})
    if "began_at" in window:
        filters.append({"range": {"path": "began_at", "lt": window["began_at"]["$lt"]}})
    stage = {
        "index": TEXT_INDEX,
        "compound": {"must": [{"text": {"query": query, "path": "summary"}}], "filter": filters},
    }
    return [{"$search": stage}, {"$limit": limit}, {"$project": projection}]


__all__ = ["TEXT_INDEX", "VECTOR_INDEX", "SearchSupport", "probe", "text_pipeline", "vector_pipeline"]
