"""Each recall channel's aggregation: how it finds its candidates, through which index, in what order.

Every pipeline starts with a ``$match`` on the core and one indexed field (a plain filter: one index serves
it on every server, and on a sharded cluster it goes to one shard); the time window and any exact condition
follow as a second ``$match`` (MongoDB merges the two into one query; the index bounds come from the first),
then the order and the bound:

======== =============================================== ==================================== ============
channel  finds                                           first ``$match`` (index)              order
======== =============================================== ==================================== ============
text     slices holding the query's rarest terms          ``terms $in`` (``core_terms``)          BM25
topic    slices whose primary path is a named node        ``path $in`` (``core_path``)           newest
parent   slices under the parent of a named node          ``ancestors $in`` (``core_ancestors``) newest
related  slices listing a named node as related           ``related $in`` (``core_related``)     newest
date     slices whose conversation overlaps a cued range  ``days $in`` (``core_days``)           newest
recent   the newest slices (a query naming nothing)       ``seq > last - n`` (``core_seq``)      newest
vector   the slices whose codes are nearest the query's   ``seq $in`` (``core_seq``)             cosine
======== =============================================== ==================================== ============

"Newest" is ``ended_at`` descending then ``_id``, the order of each of those indexes after its first two
fields, so a server reads only the slices it returns. The text channel reads every slice holding one of its
terms (at most 12 terms, each in at most 512 slices of the core) and sorts them by score. The vector channel
(with an embedder, without MongoDB Vector Search) reads the :data:`~.vectors.RESCORED` slices whose codes the
first round trip found nearest, with their int8 vectors, and recall ranks them by cosine similarity
(:mod:`.vectors`).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

CHANNEL_LIMIT_FLOOR = 8
"""The fewest candidates a channel returns, whatever the query's limit."""
MATCH_TERM_LIMIT = 12
"""The most query terms used to *find* candidates (the rarest ones); every query term still scores."""
TOPIC_CUES = 4
"""The most topic nodes a query's words name (the deepest first): recall's topic cues read by rules."""
RECENT_SCAN = 4
"""The recent channel reads the core's last ``RECENT_SCAN * per_channel`` slices by sequence number."""
NEWEST: dict[str, int] = {"ended_at": -1, "_id": 1}

ANSWER_FIELDS = (
    "unit_id",
    "slice_id",
    "core_id",
    "summary",
    "start",
    "end",
    "first_position",
    "began_at",
    "ended_at",
    "created_at",
    "topic",
    "path",
    "related",
    "profile",
    "length",
    "seq",
)


@dataclass(frozen=True)
class Plan:
    """What round trip 2 asks for: the query's terms with their ``idf``, the few rare ones that find
    candidates, topic paths and their parents, date ranges (and the UTC days they touch), the time filter,
    how many per channel, and the core's last sequence number (for the recent channel)."""

    idf: dict[str, float]
    finding: list[str]
    topics: list[str]
    parents: list[str]
    ranges: list[tuple[datetime, datetime]]
    since: datetime | None
    until: datetime | None
    per_channel: int
    days: list[int] | None = None
    nearest: list[int] | None = None
    """The sequence numbers the vector channel reads (the best by code), or None: no vector channel here."""
    newest: bool = False
    """Nothing the query names is in the index (no word the core used, no topic, no date; an empty query or
    one of stopwords included): the newest slices answer."""
    last_seq: int = 0

    def projection(self) -> dict[str, Any]:
        """What a candidate brings back: the answer's fields, the marks and speakers of the query's terms
        only, and its text score."""
        projection: dict[str, Any] = {field: 1 for field in ANSWER_FIELDS}
        projection.update({f"marks.{term}": 1 for term in self.idf})
        projection.update({f"speakers.{term}": 1 for term in self.idf})
        projection["text"] = {
            "$add": [
                0.0,
                *(
                    {"$multiply": [weight, {"$ifNull": [f"$weights.{term}", 0]}]}
                    for term, weight in self.idf.items()
                ),
            ]
        }
        return projection


def channel_pipelines(core_id: str, plan: Plan) -> dict[str, list[dict[str, Any]]]:
    """The aggregation of each channel the plan asks for (none when the query names nothing the core has)."""
    limit = {"$limit": plan.per_channel}
    project = {"$project": plan.projection()}
    window = _window(plan)
    found: dict[str, list[dict[str, Any]]] = {}

    def newest(field: str, values: list[Any], *exact: dict[str, Any]) -> list[dict[str, Any]]:
        first = {"$match": {"core_id": core_id, field: {"$in": values}}}
        return [first, *_matches(window, *exact), {"$sort": dict(NEWEST)}, limit, project]

    if plan.finding:
        found["text"] = [
            {"$match": {"core_id": core_id, "terms": {"$in": plan.finding}}},
            *_matches(window),
            project,
            {"$match": {"text": {"$gt": 0}}},
            {"$sort": {"text": -1, "_id": 1}},
            limit,
        ]
    if plan.topics:
        found["topic"] = newest("path", plan.topics)
        found["related"] = newest("related", plan.topics)
    if plan.parents:
        found["parent"] = newest("ancestors", plan.parents)
    if plan.ranges and plan.days:
        overlapping = [{"ended_at": {"$gte": start}, "began_at": {"$lt": end}} for start, end in plan.ranges]
        found["date"] = newest("days", plan.days, {"$or": overlapping})
    if plan.nearest:
        first = {"$match": {"core_id": core_id, "seq": {"$in": plan.nearest}}}
        found["vector"] = [first, *_matches(window), {"$project": {**plan.projection(), "vector": 1}}]
    if not found and plan.newest and plan.last_seq > 0:
        scan = {"$gt": plan.last_seq - RECENT_SCAN * plan.per_channel}
        first = {"$match": {"core_id": core_id, "seq": scan}}
        found["recent"] = [first, *_matches(window), {"$sort": dict(NEWEST)}, limit, project]
    return found


def _window(plan: Plan) -> dict[str, Any]:
    """The time filter: slices whose conversation overlaps ``[since, until)``."""
    window: dict[str, Any] = {}
    if plan.since is not None:
        window["ended_at"] = {"$gte": plan.since}
    if plan.until is not None:
        window["began_at"] = {"$lt": plan.until}
    return window


def _matches(*conditions: dict[str, Any]) -> list[dict[str, Any]]:
    """One ``$match`` of every non-empty condition (none when all are empty)."""
    merged = [condition for condition in conditions if condition]
    if not merged:
        return []
    return [{"$match": merged[0] if len(merged) == 1 else {"$and": merged}}]


__all__ = ["ANSWER_FIELDS", "NEWEST", "RECENT_SCAN", "Plan", "channel_pipelines"]
