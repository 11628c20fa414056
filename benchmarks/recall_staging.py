"""A bulk path for building a large recall index: the indexer's own documents, written in bulk.

``RecallIndexer.consume`` makes a few round trips per slice (its vocabulary upserts are one ``bulk_write``
on a server, one ``update_one`` each in memory, where mongomock scans the whole vocabulary for each): fine
for a live stream of rolls, too slow to build a 10,000-slice history for a benchmark, especially in memory.
:class:`StagedIndex` runs the real :class:`~partner_repo.recall.RecallIndexer` (its terms, weights, topics,
the same lookups of term frequencies and topic roots) against a store kept in this process, with
:class:`~partner_repo.recall._store.RecallStore`'s semantics (a vocabulary entry holds the keys of its
slices, each once, in the order they came), then writes in bulk: new slice documents with ``insert_many``,
the vocabulary of the staged cores replaced by one ``delete_many`` and ``insert_many``.

Only new slices of a fresh index: a second revision of a slice, or an erasure, is refused (the real store
handles those). ``tests/test_benchmarks_smoke.py`` checks that it writes the same documents as
``consume`` over the real store.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from partner_repo.mongo._indexes import RECALL_SLICES, RECALL_VOCABULARY
from partner_repo.recall import RecallIndexer
from partner_repo.recall._store import CORE, NODE, TERM, Lookup, _vocabulary_fields, slice_key, vocabulary_id

BATCH = 500


class StagedIndex:
    """A :class:`RecallIndexer` whose writes stay here until :meth:`flush`."""

    def __init__(self, database: Any) -> None:
        self.indexer = RecallIndexer(database)
        self._store = _StagedStore()
        self.indexer._store = self._store  # type: ignore[assignment]  # the bulk path: see the module

    async def flush(self, database: Any) -> None:
        """Write the slices indexed since the last flush, and the staged cores' whole vocabulary again (one
        ``delete_many`` of the cores' entries, then ``insert_many``: no scan per entry in memory)."""
        store = self._store
        slices, store.new_slices = store.new_slices, []
        if not slices:
            return
        for start in range(0, len(slices), BATCH):
            await database[RECALL_SLICES].insert_many([dict(d) for d in slices[start : start + BATCH]])
        cores = sorted({core for core, _, _ in store.vocabulary})
        await database[RECALL_VOCABULARY].delete_many({"core_id": {"$in": cores}})
        entries = list(store.vocabulary.values())
        for start in range(0, len(entries), BATCH):
            await database[RECALL_VOCABULARY].insert_many(
                [_stored(e) for e in entries[start : start + BATCH]]
            )


def _stored(entry: dict[str, Any]) -> dict[str, Any]:
    """A vocabulary entry as the real store leaves it: its fields and its slices' keys as lists."""
    document = {field: value for field, value in entry.items() if field != "keys"}
    document["slices"] = [list(key) for key in entry["slices"]]
    return document


class _StagedStore:
    """The part of :class:`~partner_repo.recall._store.RecallStore` the indexer calls, in memory."""

    def __init__(self) -> None:
        self.indexed: set[tuple[str, str]] = set()
        self.new_slices: list[dict[str, Any]] = []
        self.vocabulary: dict[tuple[str, str, str], dict[str, Any]] = {}
        self.roots_of: dict[str, dict[str, dict[str, Any]]] = {}
        """core id -> top-level topic node -> its entry"""

    async def stored(self, unit_id: str, slice_id: str) -> dict[str, Any] | None:
        if (unit_id, slice_id) in self.indexed:
            raise ValueError(f"the staged index takes new slices only, {slice_id!r} came twice")
        return None

    async def put(self, document: dict[str, Any], previous: Mapping[str, Any] | None) -> None:
        assert previous is None  # stored() never finds one
        core_id = document["core_id"]
        key = tuple(slice_key(document["unit_id"], document["slice_id"]))
        held = [(TERM, term) for term in document["terms"]]
        held += [(NODE, node) for node in document["ancestors"]]
        held.append((CORE, ""))
        for kind, value in held:
            entry = self._entry(core_id, kind, value)
            if key not in entry["keys"]:
                entry["keys"].add(key)
                entry["slices"].append(key)
        self.indexed.add((key[0], key[1]))
        self.new_slices.append(document)

    async def lookup(self, core_id: str, terms: Iterable[str], words: Iterable[str] = ()) -> Lookup:
        if list(words):
            raise ValueError("the staged index answers the indexer's lookups only")
        frequencies = {
            term: len(entry["slices"])
            for term in terms
            if (entry := self.vocabulary.get((core_id, TERM, term))) is not None
        }
        core = self.vocabulary.get((core_id, CORE, ""))
        return Lookup(frequencies=frequencies, slices=len(core["slices"]) if core else 0, nodes={})

    async def roots(self, core_id: str, limit: int = 200) -> list[str]:
        roots = [(len(entry["slices"]), value) for value, entry in self.roots_of.get(core_id, {}).items()]
        roots.sort(key=lambda item: (-item[0], item[1]))
        return [value for _, value in roots[:limit]]

    def _entry(self, core_id: str, kind: str, value: str) -> dict[str, Any]:
        found = self.vocabulary.get((core_id, kind, value))
        if found is None:
            found = {
                "_id": vocabulary_id(core_id, kind, value),
                **_vocabulary_fields(core_id, kind, value),
                "slices": [],
                "keys": set(),
            }
            self.vocabulary[(core_id, kind, value)] = found
            if kind == NODE and found["depth"] == 1:
                self.roots_of.setdefault(core_id, {})[value] = found
        return found


__all__ = ["StagedIndex"]
