"""The recall index in MongoDB: ``recall_slices`` and ``recall_vocabulary``, derived data, rebuildable.

``recall_slices`` holds one document per indexed slice, keyed by ``{u: unit id, s: slice id}``: what recall
returns (summary, times, topic) and what it ranks by (terms, weights, marks; see :mod:`.weights`).
``recall_vocabulary`` holds one document per term and per topic node of a core, plus one for the core
itself, each with the ``[unit id, slice id]`` keys of the slices that hold it; a term's document frequency
is the size of that list.

**Idempotent by construction.** Every vocabulary write is an ``$addToSet`` or a ``$pull`` of a slice's key,
so a redelivered slice, or a write repeated after a crash, changes no count twice; there is no counter to
drift. A slice is written in an order that survives a crash anywhere: record the new document as pending on
the slice's entry (a redelivery finishes that one), pull what the old revision had and the new one has not,
add what the new one has, then replace the slice's entry with the document. Removal pulls first and deletes
last; a vocabulary entry that no slice holds any more is deleted, so nothing of an erased or replaced text
stays behind. The index is derived: a slice found in it whose unit is gone is never returned
(:mod:`.service` reads the unit's messages, and drops what it cannot read).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from partner_repo.mongo import RECALL_SLICES, RECALL_VOCABULARY, driver
from partner_repo.recall._search import SearchSupport, probe
from partner_repo.recall._terms import terms

TERM = "term"
NODE = "node"
CORE = "core"

CHANNEL_LIMIT_FLOOR = 8
"""The fewest candidates a channel returns, whatever the query's limit."""
MATCH_TERM_LIMIT = 12
"""The most query terms used to *find* candidates (the rarest ones); every query term still scores."""
PENDING = "pending"
"""The field of a slice's entry holding the document a write is putting there (:meth:`RecallStore.put`)."""
TOPIC_CUES = 4
"""The most topic nodes a query's words name (the deepest first): recall's topic cues read by rules."""
COMMON_TERM_SLICES = 512
"""A term in more slices of a core than this is too common to find candidates with (it still scores them),
so a query's scan stays bounded however long the core's history is."""


def slice_key(unit_id: str, slice_id: str) -> list[str]:
    return [unit_id, slice_id]


def vocabulary_id(core_id: str, kind: str, value: str) -> dict[str, str]:
    return {"c": core_id, "k": kind, "v": value}


@dataclass(frozen=True)
class Lookup:
    """What the first round trip of a recall learns: each query term's slice count, the core's slice count,
    and the topic nodes the query names (``path`` → slice count; at most :data:`TOPIC_CUES`)."""

    frequencies: dict[str, int]
    slices: int
    nodes: dict[str, int]


@dataclass(frozen=True)
class Plan:
    """What the second round trip asks for: a query's terms with their ``idf``, the few rare ones that find
    candidates, topic paths and their parents, date ranges, the time filter and how many per channel."""

    idf: dict[str, float]
    finding: list[str]
    topics: list[str]
    parents: list[str]
    ranges: list[tuple[datetime, datetime]]
    since: datetime | None
    until: datetime | None
    per_channel: int
    vectors: bool = False
    newest: bool = False
    """Nothing in the query to match (no words, no cues): the newest slices answer. A query whose words the
    core never used finds nothing instead."""

    def projection(self) -> dict[str, Any]:
        """What a candidate brings back: the answer's fields, the marks of the query's terms only, and its
        vector when recall ranks vectors itself."""
        projection: dict[str, Any] = {field: 1 for field in _ANSWER_FIELDS}
        projection.update({f"marks.{term}": 1 for term in self.idf})
        if self.vectors:
            projection["vector"] = 1
        return projection


class RecallStore:
    """Reads and writes the recall collections of one database."""

    def __init__(self, database: Any) -> None:
        self._slices = database[RECALL_SLICES]
        self._vocabulary = database[RECALL_VOCABULARY]

    # -- writing --------------------------------------------------------------------------------------------

    async def stored(self, unit_id: str, slice_id: str) -> dict[str, Any] | None:
        """What is indexed of a slice (its revision and what it holds in the vocabulary) and the document a
        write left ``pending`` (whole), or None."""
        document: dict[str, Any] | None = await self._slices.find_one(
            {"_id": {"u": unit_id, "s": slice_id}},
            {"revision": 1, "terms": 1, "ancestors": 1, "core_id": 1, PENDING: 1},
        )
        return document

    async def put(self, document: dict[str, Any], previous: Mapping[str, Any] | None) -> None:
        """Index ``document`` (a slice's), replacing ``previous`` (what :meth:`stored` read, or None).

        The document is first recorded as ``pending`` on the slice's entry, so a delivery after a crash
        finishes writing *this* document (the indexer reuses it) rather than another one a topic extractor
        might give the second time; what the previous revision, or an unfinished write, held and this one
        does not is pulled, what it holds is added, and the document replaces the entry last."""
        core_id = document["core_id"]
        key = slice_key(document["unit_id"], document["slice_id"])
        await self._slices.update_one(
            {"_id": document["_id"]},
            {"$set": {PENDING: document, "unit_id": document["unit_id"]}},
            upsert=True,
        )
        if previous is not None:
            gone = _held(previous) - _held(document)
            await self._pull(previous.get("core_id") or core_id, gone, key)
        adds: list[driver.Update] = [
            (
                {"_id": vocabulary_id(core_id, kind, value)},
                {"$addToSet": {"slices": key}, "$setOnInsert": _vocabulary_fields(core_id, kind, value)},
                True,
            )
            for kind, value in sorted(_held(document))
        ]
        await driver.update_each(self._vocabulary, adds)
        await self._slices.replace_one({"_id": document["_id"]}, document, upsert=True)

    async def remove_units(self, unit_ids: Sequence[str]) -> int:
        """Remove every indexed slice of ``unit_ids`` and every vocabulary entry left holding no slice; how
        many slices were indexed."""
        if not unit_ids:
            return 0
        found = [
            document
            async for document in self._slices.find(
                {"unit_id": {"$in": list(unit_ids)}}, {"terms": 1, "ancestors": 1, "core_id": 1, PENDING: 1}
            )
        ]
        for document in found:
            key = slice_key(document["_id"]["u"], document["_id"]["s"])
            core_id = document.get("core_id") or document[PENDING]["core_id"]
            await self._pull(core_id, _held(document), key)
        if found:
            await self._slices.delete_many({"_id": {"$in": [document["_id"] for document in found]}})
        return len(found)

    async def _pull(self, core_id: str, held: Iterable[tuple[str, str]], key: list[str]) -> None:
        """Pull ``key`` from the vocabulary entries of ``held``, then delete those left holding no slice (an
        entry names a term: once no slice holds it, nothing of the text it came from may stay). An entry
        that another slice's write adds to meanwhile is not empty when the delete runs, or is upserted again
        after it."""
        ids = [vocabulary_id(core_id, kind, value) for kind, value in sorted(held)]
        await driver.update_each(
            self._vocabulary, [({"_id": i}, {"$pull": {"slices": key}}, False) for i in ids]
        )
        if ids:
            await self._vocabulary.delete_many({"_id": {"$in": ids}, "slices": {"$size": 0}})

    # -- reading --------------------------------------------------------------------------------------------

    async def lookup(self, core_id: str, terms: Iterable[str], words: Iterable[str] = ()) -> Lookup:
        """One round trip, answered in one document whatever the query's length or the tree's size: the
        slice count of each of ``terms`` and of the core, and the topic nodes whose own name is made of
        ``words`` only (at most :data:`TOPIC_CUES`, deepest first, each with slices)."""
        ids = [vocabulary_id(core_id, TERM, term) for term in terms] + [vocabulary_id(core_id, CORE, "")]
        counted = {"slices": {"$size": {"$ifNull": ["$slices", []]}}, "kind": 1, "value": 1}
        clauses: list[dict[str, Any]] = [{"_id": {"$in": ids}}]
        facets: dict[str, list[dict[str, Any]]] = {
            "counts": [{"$match": {"kind": {"$ne": NODE}}}, {"$project": counted}]
        }
        named = sorted(set(words))
        if named:
            clauses.append({"core_id": core_id, "kind": NODE, "words": {"$in": named}})
            within = {"$setUnion": [{"$ifNull": ["$words", []]}, {"$literal": named}]}
            facets["nodes"] = [
                {"$match": {"kind": NODE}},
                {"$project": {**counted, "depth": 1, "named": {"$setEquals": [within, {"$literal": named}]}}},
                {"$match": {"named": True, "slices": {"$gt": 0}}},
                {"$sort": {"depth": -1, "value": 1}},
                {"$limit": TOPIC_CUES},
            ]
        pipeline: list[dict[str, Any]] = [{"$match": {"$or": clauses}}, {"$facet": facets}]
        found = await driver.aggregate_list(self._vocabulary, pipeline)
        answer: dict[str, Any] = found[0] if found else {}
        frequencies: dict[str, int] = {}
        total = 0
        for row in answer.get("counts") or ():
            if row.get("kind") == TERM:
                frequencies[row["value"]] = int(row.get("slices") or 0)
            elif row.get("kind") == CORE:
                total = int(row.get("slices") or 0)
        nodes = {row["value"]: int(row["slices"]) for row in answer.get("nodes") or ()}
        return Lookup(frequencies=frequencies, slices=total, nodes=nodes)

    async def candidates(self, core_id: str, plan: Plan) -> dict[str, list[dict[str, Any]]]:
        """One round trip: each channel's best slices (see :class:`Plan`), projected to what ranking and the
        answer need (only the marks of the query's terms)."""
        scope: dict[str, Any] = {"core_id": core_id}
        if plan.since is not None:
            scope["ended_at"] = {"$gte": plan.since}
        if plan.until is not None:
            scope["began_at"] = {"$lt": plan.until}
        channels: dict[str, list[dict[str, Any]]] = {}
        clauses: list[dict[str, Any]] = []
        limit = {"$limit": plan.per_channel}
        newest = {"$sort": {"ended_at": -1, "_id": 1}}
        if plan.finding:
            clauses.append({"terms": {"$in": plan.finding}})
            channels["text"] = [{"$match": {"text": {"$gt": 0}}}, {"$sort": {"text": -1, "_id": 1}}, limit]
        if plan.topics:
            clauses.append({"ancestors": {"$in": plan.topics + plan.parents}})
            clauses.append({"related": {"$in": plan.topics}})
            channels["topic"] = [{"$match": {"topic": {"$in": plan.topics}}}, newest, limit]
            channels["related"] = [{"$match": {"related": {"$in": plan.topics}}}, newest, limit]
        if plan.parents:
            channels["parent"] = [{"$match": {"ancestors": {"$in": plan.parents}}}, newest, limit]
        for start, end in plan.ranges:
            clauses.append({"ended_at": {"$gte": start}, "began_at": {"$lt": end}})
        if plan.ranges:
            overlapping = [
                {"ended_at": {"$gte": start}, "began_at": {"$lt": end}} for start, end in plan.ranges
            ]
            channels["date"] = [{"$match": {"$or": overlapping}}, newest, limit]
        projection = plan.projection()
        if not clauses and not plan.newest:
            return {}
        if not clauses:  # nothing to match: the newest slices, straight from the core_ended index
            pipeline: list[dict[str, Any]] = [{"$match": scope}, newest, limit, {"$project": projection}]
            return {"recent": await driver.aggregate_list(self._slices, pipeline)}
        text_score = {
            "$add": [
                0.0,
                *(
                    {"$multiply": [weight, {"$ifNull": [f"$weights.{term}", 0]}]}
                    for term, weight in plan.idf.items()
                ),
            ]
        }
        projection["text"] = text_score
        pipeline = [
            {"$match": {**scope, "$or": clauses}},
            {"$project": projection},
            {"$facet": channels},
        ]
        found = await driver.aggregate_list(self._slices, pipeline)
        return {name: list(rows) for name, rows in (found[0] if found else {}).items()}

    async def search_support(self) -> SearchSupport:
        """Which MongoDB Search indexes the server offers on the slices (:func:`.search.probe`)."""
        return await probe(self._slices)

    async def search(self, pipeline: list[dict[str, Any]]) -> list[dict[str, Any]]:
        """The slices a MongoDB Search pipeline (:mod:`.search`) finds, in its order."""
        return list(await driver.aggregate_list(self._slices, pipeline))

    async def nodes(self, core_id: str) -> list[tuple[str, int]]:
        """Every topic node of a core with its slice count, in path order."""
        pipeline: list[dict[str, Any]] = [
            {"$match": {"core_id": core_id, "kind": NODE}},
            {"$project": {"value": 1, "slices": {"$size": {"$ifNull": ["$slices", []]}}}},
            {"$sort": {"value": 1}},
        ]
        rows = await driver.aggregate_list(self._vocabulary, pipeline)
        return [(row["value"], int(row["slices"])) for row in rows if row["slices"]]

    async def roots(self, core_id: str, limit: int = 200) -> list[str]:
        """The core's top-level topic nodes, largest first (at most ``limit``)."""
        pipeline: list[dict[str, Any]] = [
            {"$match": {"core_id": core_id, "kind": NODE, "depth": 1}},
            {"$project": {"value": 1, "slices": {"$size": {"$ifNull": ["$slices", []]}}}},
            {"$match": {"slices": {"$gt": 0}}},
            {"$sort": {"slices": -1, "value": 1}},
            {"$limit": limit},
        ]
        return [row["value"] for row in await driver.aggregate_list(self._vocabulary, pipeline)]

    async def count(self, core_id: str | None = None) -> int:
        """How many slices are indexed (of one core, or of all)."""
        query = {} if core_id is None else {"core_id": core_id}
        return int(await self._slices.count_documents(query))


_ANSWER_FIELDS = (
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
    "related",
    "profile",
    "length",
)


def _vocabulary_fields(core_id: str, kind: str, value: str) -> dict[str, Any]:
    fields: dict[str, Any] = {"core_id": core_id, "kind": kind, "value": value}
    if kind == NODE:
        names = value.split("->")
        fields["depth"] = len(names)
        fields["words"] = sorted(set(terms(names[-1])))  # of its own name: what a query names it by
    return fields


def _held(document: Mapping[str, Any]) -> set[tuple[str, str]]:
    """The vocabulary entries an indexed slice's entry holds: its terms, its topic nodes and its core, and
    those of the document a write left pending on it."""
    held: set[tuple[str, str]] = set()
    for part in (document, document.get(PENDING) or {}):
        if part:
            held.update((TERM, term) for term in part.get("terms") or ())
            held.update((NODE, node) for node in part.get("ancestors") or ())
            held.add((CORE, ""))
    return held


__all__ = ["Lookup", "Plan", "RecallStore", "slice_key", "vocabulary_id"]
