"""The recall index's writes, and the reads indexing needs: ``recall_index``, derived data, rebuildable.

``recall_index`` holds one document per indexed slice (what recall returns and ranks by: summary, times,
topic, terms, weights, marks), one per topic node of each core's tree (its path, its readable label, the
words of its own name, and a counter of the slices under it), and one per core (a counter of its slices and
the last sequence number given to one): :mod:`.keys`. No document grows with the history: a slice's is
bounded by the slice, a node's and a core's by a constant. A term's document frequency is not stored at all:
recall counts it on the ``core_terms`` index when it needs it (:mod:`.queries`).

**Indexing a slice** is three round trips whatever the history's size:

1. one read of the slice's own document (its revision, sequence number and nodes) and of its core's;
2. one aggregation over the core's last :data:`WINDOW` slices (by sequence number): the document frequency
   of the slice's terms among them and the roots they were filed under, which the topic extractor is given;
3. one ordered bulk write: the slice's document, replaced only if it still holds the revision read in 1
   (inserted only if it is still absent), then the counters (the core's, and each node the slice enters or
   leaves), and the deletion of nodes left with no slice.

**Why no ``pending`` protocol is needed.** The slice's document is the fence: the first operation of the
bulk matches only what step 1 read, so a redelivery, or a concurrent delivery of the same slice, fails on
it with a duplicate key and the ordered bulk stops before any counter moves. A revision already indexed is
not indexed again (the indexer stops after step 1, without asking the topic extractor). A crash can only
fall between two operations of one bulk on the server, or between the deletion of an erased unit's nodes
and its slices: counters then read low (never high), nothing of an erased text is left behind, and
``partner-repo check`` reports a counter that differs from the index and ``repair`` sets it again
(:mod:`.checking`).

**Vectors** live in the slice's own document (``vtag``, ``vcode``, ``vector``, ``mvectors``: :mod:`.vectors`),
so they are written, replaced and erased with it, and the core's document names the embedder they are of.
:meth:`RecallStore.put_vectors` (a reindex) only updates a slice still holding the revision it embedded and
not yet carrying that embedder's vectors: a newer delivery wins, an erased slice stays erased, and no
slice's vectors are written twice.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from itertools import chain
from typing import Any

from partner_repo.mongo import RECALL_INDEX, BulkWriteError, DeleteMany, ReplaceOne, UpdateOne, driver

# 0.4's names of this module that now live where the recall's reads are planned and made:
from partner_repo.recall._keys import CORE, NODE, core_key, node_key, slice_key, stored_count
from partner_repo.recall._search import SearchSupport, probe
from partner_repo.recall._terms import terms
from partner_repo.recall._vectors import Identity, with_seq

WINDOW = 64
"""The core's most recent slices a new slice's keywords and roots are judged against."""
ROOTS = 50
"""The most roots a topic extractor is given (the most used among the window's slices first)."""
DUPLICATE_KEY = 11000
WRITE_ATTEMPTS = 3
"""How often a write that lost a race to another delivery of its slice reads again and retries."""
REMOVE_BATCH = 500


@dataclass(frozen=True)
class Stored:
    """What step 1 reads: the slice's indexed revision, sequence number and nodes (None, 0, () when it is
    not indexed), and its core's last sequence number, slice count and the embedder its vectors are of."""

    revision: int | None = None
    seq: int = 0
    ancestors: tuple[str, ...] = ()
    last_seq: int = 0
    slices: int = 0
    embedder: Identity | None = None


@dataclass(frozen=True)
class Window:
    """What step 2 reads: each of the slice's terms' document frequency among the core's last slices, how
    many slices that was, and their roots (most used first)."""

    frequencies: dict[str, int] = field(default_factory=dict)
    slices: int = 0
    roots: list[str] = field(default_factory=list)


class RecallStore:
    """Writes the recall index of one database, and reads what indexing needs (see the module)."""

    def __init__(self, database: Any) -> None:
        self._index = database[RECALL_INDEX]

    async def stored(self, core_id: str, unit_id: str, slice_id: str) -> Stored:
        """Step 1: the slice's document and its core's, in one read."""
        wanted = [slice_key(unit_id, slice_id), core_key(core_id)]
        projection = {
            "kind": 1,
            "revision": 1,
            "seq": 1,
            "ancestors": 1,
            "slices": 1,
            "last_seq": 1,
            "embedder": 1,
        }
        rows = await self._index.find({"core_id": core_id, "_id": {"$in": wanted}}, projection).to_list(None)
        found = {row["_id"]: row for row in rows}
        piece, core = found.get(wanted[0]) or {}, found.get(wanted[1]) or {}
        revision = piece.get("revision")
        return Stored(
            revision=int(revision) if isinstance(revision, int) else None,
            seq=stored_count(piece.get("seq")) or 0,
            ancestors=tuple(piece.get("ancestors") or ()),
            last_seq=stored_count(core.get("last_seq")) or 0,
            slices=stored_count(core.get("slices")) or 0,
            embedder=Identity.stored(core.get("embedder")),
        )

    async def window(self, core_id: str, last_seq: int, slice_terms: Iterable[str]) -> Window:
        """Step 2: ``slice_terms``' document frequencies among the core's last :data:`WINDOW` slices (those
        numbered after ``last_seq - WINDOW``), and those slices' roots, most used first.

        The slices' terms come back and are intersected here: MongoDB would do it in the pipeline
        (``$setIntersection``), the in-memory backend cannot, and the read is the same either way."""
        if last_seq <= 0:
            return Window()
        pipeline: list[dict[str, Any]] = [
            {"$match": {"core_id": core_id, "seq": {"$gt": last_seq - WINDOW}}},
            {"$project": {"_id": 0, "terms": 1, "ancestors": 1}},
        ]
        found = await driver.aggregate_list(self._index, pipeline)
        wanted = set(slice_terms)
        shared = (wanted.intersection(row.get("terms") or ()) for row in found)
        frequencies = Counter(chain.from_iterable(shared))  # counted at C speed: 64 rows every index write
        roots = Counter(row["ancestors"][0] for row in found if row.get("ancestors"))
        ranked = sorted(roots, key=lambda root: (-roots[root], root))[:ROOTS]
        return Window(frequencies=dict(frequencies), slices=len(found), roots=ranked)

    async def put(
        self,
        document: dict[str, Any],
        stored: Stored,
        labels: Mapping[str, str],
        embedder: Identity | None = None,
    ) -> bool:
        """Step 3: write ``document`` (a slice's) over what ``stored`` read, with the counters it moves;
        ``labels`` gives each of its nodes' readable label; ``embedder``, when the document carries vectors,
        is recorded on the core's document if it records none yet. False when another delivery indexed this
        slice at this revision or a newer one meanwhile (nothing is written then)."""
        for _ in range(WRITE_ATTEMPTS):
            try:
                writes = _writes(document, stored, labels, embedder)
                await driver.bulk_write(self._index, writes, ordered=True)
                return True
            except BulkWriteError as exc:
                if not _lost_race(exc):
                    raise
            stored = await self.stored(document["core_id"], document["unit_id"], document["slice_id"])
            if stored.revision is not None and stored.revision >= document["revision"]:
                return False
            document = _numbered(document, stored.seq or document["seq"])
        return False

    async def remove_units(self, core_id: str, unit_ids: Sequence[str]) -> int:
        """Remove every indexed slice of ``unit_ids`` (units of ``core_id``), their counts, and every node
        left with no slice; how many slices were indexed. Counters and nodes go first, the slices last: a
        rerun after a crash finds the slices again, and no node named by an erased text is left."""
        removed = 0
        for start in range(0, len(unit_ids), REMOVE_BATCH):
            batch = list(unit_ids[start : start + REMOVE_BATCH])
            found = await self._index.find(
                {"core_id": core_id, "unit_id": {"$in": batch}}, {"ancestors": 1}
            ).to_list(None)
            if not found:
                continue
            held: dict[str, int] = {}
            for row in found:
                for path in row.get("ancestors") or ():
                    held[path] = held.get(path, 0) + 1
            await driver.bulk_write(self._index, _released(core_id, len(found), held), ordered=True)
            await self._index.delete_many({"core_id": core_id, "_id": {"$in": [row["_id"] for row in found]}})
            removed += len(found)
        return removed

    async def cores(self) -> list[str]:
        """Every core the index holds something of (read from the ``{core_id, _id}`` index)."""
        return sorted(str(core) for core in await self._index.distinct("core_id") if isinstance(core, str))

    async def slices_after(self, core_id: str, after: int, limit: int) -> list[dict[str, Any]]:
        """Up to ``limit`` of the core's slice documents numbered after ``after``, in number order, with what
        embedding them again needs (through ``core_seq``)."""
        projection = {
            "unit_id": 1,
            "slice_id": 1,
            "revision": 1,
            "seq": 1,
            "start": 1,
            "end": 1,
            "summary": 1,
            "vtag": 1,
        }
        found = self._index.find({"core_id": core_id, "seq": {"$gt": after}}, projection)
        return list(await found.sort("seq", 1).limit(limit).to_list(None))

    async def name_embedder(self, core_id: str, embedder: Identity) -> Identity | None:
        """Record ``embedder`` as the one the core's vectors are of (a core's vectors are being replaced by
        another's, or named for the first time); the one recorded before, if any."""
        before = await self._index.find_one_and_update(
            {"_id": core_key(core_id), "core_id": core_id},
            {"$set": {"embedder": embedder.as_document()}},
            projection={"embedder": 1},
        )
        return Identity.stored((before or {}).get("embedder"))

    async def put_vectors(
        self, core_id: str, unit_id: str, slice_id: str, revision: int, fields: Mapping[str, Any]
    ) -> bool:
        """Set a slice's vectors (``fields``, of the tag they carry) if it still holds ``revision`` and not
        yet vectors of that tag: fenced by the revision, so a delivery of a newer one (which writes its own)
        wins, and never written twice; an update only, so a slice erased meanwhile stays erased."""
        fence = {
            "_id": slice_key(unit_id, slice_id),
            "core_id": core_id,
            "revision": revision,
            "vtag": {"$ne": fields["vtag"]},
        }
        result = await self._index.update_one(fence, {"$set": dict(fields)})
        return bool(result.modified_count)

    async def search_support(self) -> SearchSupport:
        """Which MongoDB Search indexes the server offers on the index (:func:`.search.probe`)."""
        return await probe(self._index)


def _numbered(document: dict[str, Any], seq: int) -> dict[str, Any]:
    """``document`` under sequence number ``seq`` (its vector code begins with it)."""
    numbered = {**document, "seq": seq}
    if "vcode" in document:
        numbered["vcode"] = with_seq(document["vcode"], seq)
    return numbered


def _writes(
    document: dict[str, Any], stored: Stored, labels: Mapping[str, str], embedder: Identity | None
) -> list[Any]:
    """The ordered bulk of step 3: the fenced slice write first, then what it moves."""
    core_id, key = document["core_id"], document["_id"]
    fresh = stored.revision is None
    # the fence: the revision read in step 1 (or none at all); an upsert that finds another one there fails
    # on the duplicate _id, and the ordered bulk stops before anything it would have moved
    fence = {"_id": key, "core_id": core_id, "revision": {"$exists": False} if fresh else stored.revision}
    writes: list[Any] = [ReplaceOne(fence, document, upsert=True)]
    counters: dict[str, Any] = {"$max": {"last_seq": document["seq"]}, "$setOnInsert": {"kind": CORE}}
    if fresh:
        counters["$inc"] = {"slices": 1}
    writes.append(UpdateOne({"_id": core_key(core_id), "core_id": core_id}, counters, upsert=True))
    if embedder is not None:  # the core's first vectors name their embedder (a later one never replaces it)
        unnamed = {"_id": core_key(core_id), "core_id": core_id, "embedder": {"$exists": False}}
        writes.append(UpdateOne(unnamed, {"$set": {"embedder": embedder.as_document()}}))
    entered = [path for path in document["ancestors"] if path not in stored.ancestors]
    left = [path for path in stored.ancestors if path not in document["ancestors"]]
    for path in entered:
        node = {"$inc": {"slices": 1}, "$setOnInsert": node_fields(path, labels.get(path, path))}
        writes.append(UpdateOne({"_id": node_key(core_id, path), "core_id": core_id}, node, upsert=True))
    writes.extend(_left(core_id, {path: 1 for path in left}))
    return writes


def _released(core_id: str, slices: int, held: Mapping[str, int]) -> list[Any]:
    """What removing ``slices`` slices holding ``held`` nodes moves: the counters, and the nodes and the
    core's document once nothing is left under them."""
    core = {"_id": core_key(core_id), "core_id": core_id}
    writes: list[Any] = [UpdateOne(core, {"$inc": {"slices": -slices}})]
    writes.extend(_left(core_id, held))
    writes.append(DeleteMany({**core, "slices": {"$lte": 0}}))
    return writes


def _left(core_id: str, held: Mapping[str, int]) -> list[Any]:
    """Each node's counter lowered, then the nodes left with no slice deleted."""
    if not held:
        return []
    ids = [node_key(core_id, path) for path in held]
    writes: list[Any] = [
        UpdateOne({"_id": node_key(core_id, path), "core_id": core_id}, {"$inc": {"slices": -count}})
        for path, count in held.items()
    ]
    writes.append(DeleteMany({"_id": {"$in": ids}, "core_id": core_id, "slices": {"$lte": 0}}))
    return writes


def node_fields(path: str, label: str) -> dict[str, Any]:
    """A node's fixed fields: its path (``node``) and label, its depth, and ``names``, what a query or a cue
    names it by (the terms of its own name as path and as label, and the path and label whole)."""
    names = path.split("->")
    shown = label.split("->")
    own = sorted(set(terms(names[-1])) | set(terms(shown[-1])))
    return {
        "kind": NODE,
        "node": path,
        "label": label,
        "depth": len(names),
        "words": own,
        "names": sorted({*own, path, label}),
    }


def _lost_race(exc: BulkWriteError) -> bool:
    """Whether a bulk stopped at its first operation on a duplicate key: another delivery of the slice
    wrote it since it was read (an ordered bulk applies nothing after a failed operation)."""
    errors = exc.details.get("writeErrors") or []
    return bool(errors) and errors[0].get("index") == 0 and errors[0].get("code") == DUPLICATE_KEY


__all__ = [
    "ROOTS",
    "WINDOW",
    "RecallStore",
    "Stored",
    "Window",
    "node_fields",
]
