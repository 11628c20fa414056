"""The recall index's reads for a query: counts and named nodes first, then each channel's candidates.

Every read selects one core first and is a plain filter on fields of one index, so MongoDB serves each from
that index (and a cluster sharded on ``{core_id: 1, _id: 1}`` sends each to one shard); reads that do not
depend on one another go in the same round trip:

- **counts** (round trip 1): one small aggregation per query term, ``{core_id, terms: t}`` on
  ``core_terms`` stopped after :data:`COMMON_TERM_SLICES` + 1 slices (a term in more slices finds nothing:
  past that its exact count would change nothing), the core's document (its slice count and last sequence
  number), and the nodes the query's words (or the caller's topic cues) name, on ``core_names``;
- **candidates** (round trip 2): one aggregation per channel (:mod:`.channels`);

and, with an embedder, the codes of every slice of the core (round trip 1: one read of the ``core_vectors``
index alone, the vector search's, :mod:`.vectors`) and the messages' vectors of the best slices once they are
ranked (round trip 3, by ``_id``).

A read is never a scan of the core: each stops at a bound (:data:`COMMON_TERM_SLICES` per term,
:data:`NODE_SCAN` nodes, ``per_channel`` slices newest first through an index that orders them).
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from partner_repo.mongo import RECALL_INDEX, driver
from partner_repo.recall._channels import Plan, channel_pipelines
from partner_repo.recall._keys import NODE, core_key, node_ids, node_key, node_path, slice_key, stored_count
from partner_repo.recall._topics import SEPARATOR
from partner_repo.recall._vectors import Identity, read_packed

COMMON_TERM_SLICES = 512
"""A term in more slices of a core than this is too common to find candidates with (it still scores them),
so its count stops there: a query's reads stay bounded however long the core's history is."""
MAX_QUERY_TERMS = 24
"""The most distinct terms of a query that are counted (in the order the query names them); a longer
query's other terms neither find nor score."""
CODES_BATCH = 1_000_000
"""The first batch of the codes' read: all of them (the server still stops a batch at 16 MiB)."""

NODE_SCAN = 64
"""The most topic nodes sharing a query's words that are read to find the ones the query names."""


@dataclass(frozen=True)
class NamedNode:
    """A topic node a query's words (or a caller's cue) may name."""

    path: str
    label: str
    words: tuple[str, ...]
    depth: int
    slices: int


@dataclass(frozen=True)
class Lookup:
    """What round trip 1 learns: each query term's slice count (at most :data:`COMMON_TERM_SLICES` + 1),
    the core's slice count and last sequence number, and the nodes that share a name with the query."""

    frequencies: dict[str, int]
    slices: int
    last_seq: int
    nodes: list[NamedNode]
    embedder: Identity | None = None
    """The embedder the core's vectors are of (None: it has none)."""


class RecallQueries:
    """The reads of a recall on the index of one database (see the module)."""

    def __init__(self, database: Any) -> None:
        self._index = database[RECALL_INDEX]

    def lookup(self, core_id: str, query_terms: Sequence[str], names: Iterable[str]) -> list[Awaitable[Any]]:
        """Round trip 1's reads, to send together: one count per term, the core, the named nodes."""
        counted = list(dict.fromkeys(query_terms))[:MAX_QUERY_TERMS]
        reads: list[Awaitable[Any]] = [self._core(core_id), self._nodes(core_id, sorted(set(names)))]
        reads.extend(self._count(core_id, term) for term in counted)
        return reads

    @staticmethod
    def looked_up(query_terms: Sequence[str], answers: Sequence[Any]) -> Lookup:
        """The :class:`Lookup` the answers of :meth:`lookup`'s reads make."""
        core, nodes, *counts = answers
        counted = list(dict.fromkeys(query_terms))[:MAX_QUERY_TERMS]
        return Lookup(
            frequencies={term: count for term, count in zip(counted, counts, strict=True) if count},
            slices=stored_count(core.get("slices")) or 0,
            last_seq=stored_count(core.get("last_seq")) or 0,
            nodes=nodes,
            embedder=Identity.stored(core.get("embedder")),
        )

    async def candidates(self, core_id: str, plan: Plan) -> dict[str, list[dict[str, Any]]]:
        """Round trip 2: each channel's best slices, read together."""
        pipelines = channel_pipelines(core_id, plan)
        answers = await asyncio.gather(
            *(driver.aggregate_list(self._index, pipeline) for pipeline in pipelines.values())
        )
        return dict(zip(pipelines, (list(rows) for rows in answers), strict=True))

    async def codes(self, core_id: str, tag: str) -> list[Any]:
        """The vector code of every slice of the core with vectors of embedder ``tag``: one read the
        ``core_vectors`` index answers alone (MongoDB fetches no document for it)."""
        pipeline: list[dict[str, Any]] = [
            {"$match": {"core_id": core_id, "vtag": tag}},
            {"$project": {"_id": 0, "vcode": 1}},
        ]
        # one batch whatever the core's size (a server caps it at 16 MiB; 10,000 codes are about 0.6 MB):
        # the default first batch of 101 documents would add a getMore round trip past 101 slices
        rows = await driver.aggregate_list(self._index, pipeline, batchSize=CODES_BATCH)
        return [row.get("vcode") for row in rows]

    async def message_vectors(
        self, core_id: str, slices: Sequence[tuple[str, str]], dimensions: int
    ) -> dict[tuple[str, str], list[Sequence[int]]]:
        """The message vectors of each of ``slices`` (unit id, slice id), read by ``_id``."""
        if not slices:
            return {}
        keys = [slice_key(unit_id, slice_id) for unit_id, slice_id in slices]
        rows = await self._index.find(
            {"core_id": core_id, "_id": {"$in": keys}}, {"unit_id": 1, "slice_id": 1, "mvectors": 1}
        ).to_list(None)
        return {
            (row.get("unit_id"), row.get("slice_id")): read_packed(row.get("mvectors"), dimensions)
            for row in rows
        }

    async def search(self, pipeline: list[dict[str, Any]]) -> list[dict[str, Any]]:
        """The slices a MongoDB Search pipeline (:mod:`.search`) finds, in its order."""
        return list(await driver.aggregate_list(self._index, pipeline))

    async def tree(self, core_id: str) -> list[dict[str, Any]]:
        """Every topic node of the core with slices under it (node, label, depth, slices), in path order."""
        rows = await self._index.find(
            {"core_id": core_id, "_id": node_ids(core_id)}, {"node": 1, "label": 1, "slices": 1}
        ).to_list(None)
        nodes = []
        for row in rows:  # read as it is: a node that lost a field still shows (check reports it)
            path = row["node"] if isinstance(row.get("node"), str) else node_path(row.get("_id"))
            slices = stored_count(row.get("slices")) or 0
            if path and slices > 0:
                label = row["label"] if isinstance(row.get("label"), str) and row["label"] else path
                nodes.append({"node": path, "label": label, "slices": slices})
        return sorted(nodes, key=lambda row: row["node"])

    async def tree_page(
        self, core_id: str, after: str | None, limit: int
    ) -> tuple[list[dict[str, Any]], bool]:
        """Up to ``limit`` topic nodes of the core with slices under it, in id order, after the node whose
        path is ``after``, and whether more follow: a keyset page over the ``{core_id, _id}`` index (every
        node id of a core starts with the same prefix, :func:`.keys.node_ids`), so a page reads ``limit``
        nodes however large the tree is."""
        bounds: dict[str, Any] = dict(node_ids(core_id))
        if after is not None:
            del bounds["$gte"]
            bounds["$gt"] = node_key(core_id, after)
        rows = await (
            self._index.find(
                {"core_id": core_id, "_id": bounds, "kind": NODE}, {"node": 1, "label": 1, "slices": 1}
            )
            .sort("_id", 1)
            .limit(limit + 1)
            .to_list(None)
        )
        more = len(rows) > limit
        nodes = []
        for row in rows[:limit]:  # read as it is, as tree() does
            path = row["node"] if isinstance(row.get("node"), str) else node_path(row.get("_id"))
            slices = stored_count(row.get("slices")) or 0
            if path:
                label = row["label"] if isinstance(row.get("label"), str) and row["label"] else path
                nodes.append({"node": path, "label": label, "slices": slices})
        return nodes, more

    async def slice_topics(self, core_id: str, slices: Sequence[tuple[str, str]]) -> dict[str, str]:
        """slice id -> its topic path as shown, for those of ``slices`` (unit id, slice id) the index holds:
        one point read per slice id, by ``_id`` within the core."""
        if not slices:
            return {}
        keys = sorted({slice_key(unit_id, slice_id) for unit_id, slice_id in slices})
        rows = await self._index.find(
            {"core_id": core_id, "_id": {"$in": keys}}, {"slice_id": 1, "topic": 1}
        ).to_list(None)
        return {
            row["slice_id"]: row["topic"]
            for row in rows
            if isinstance(row.get("slice_id"), str) and isinstance(row.get("topic"), str)
        }

    async def count(self, core_id: str) -> int:
        """How many slices of the core are indexed (its counter)."""
        return stored_count((await self._core(core_id)).get("slices")) or 0

    async def _count(self, core_id: str, term: str) -> int:
        pipeline: list[dict[str, Any]] = [
            {"$match": {"core_id": core_id, "terms": term}},
            {"$limit": COMMON_TERM_SLICES + 1},
            {"$count": "n"},
        ]
        rows = await driver.aggregate_list(self._index, pipeline)
        return int(rows[0]["n"]) if rows else 0

    async def _core(self, core_id: str) -> dict[str, Any]:
        found = await self._index.find_one(
            {"core_id": core_id, "_id": core_key(core_id)}, {"slices": 1, "last_seq": 1, "embedder": 1}
        )
        return dict(found or {})

    async def _nodes(self, core_id: str, names: list[str]) -> list[NamedNode]:
        if not names:
            return []
        pipeline: list[dict[str, Any]] = [
            {"$match": {"core_id": core_id, "names": {"$in": names}}},
            {"$limit": NODE_SCAN},
            {"$project": {"node": 1, "label": 1, "words": 1, "depth": 1, "slices": 1}},
        ]
        nodes = []
        for row in await driver.aggregate_list(self._index, pipeline):  # read as it is (check reports it)
            path = row["node"] if isinstance(row.get("node"), str) else node_path(row.get("_id"))
            if not path:
                continue
            label = row.get("label")
            words = row.get("words")
            nodes.append(
                NamedNode(
                    path=path,
                    label=label if isinstance(label, str) and label else path,
                    words=tuple(w for w in words if isinstance(w, str)) if isinstance(words, list) else (),
                    depth=path.count(SEPARATOR) + 1,
                    slices=stored_count(row.get("slices")) or 0,
                )
            )
        return nodes


__all__ = ["COMMON_TERM_SLICES", "MAX_QUERY_TERMS", "NODE_SCAN", "Lookup", "NamedNode", "RecallQueries"]
