"""The recall index in MongoDB (``RecallStore`` writes, ``RecallQueries`` reads): a slice's document is the
fence of its write, so writing it twice counts it once; a new revision moves the counters; removal leaves no
node behind; counts come from the index, capped; every read selects one core."""

from __future__ import annotations

import asyncio
from dataclasses import replace
from datetime import UTC, datetime
from typing import Any

from partner_repo.recall._channels import Plan
from partner_repo.recall._keys import slice_key
from partner_repo.recall._queries import COMMON_TERM_SLICES, RecallQueries
from partner_repo.recall._service import _named
from partner_repo.recall._store import RecallStore, Stored
from tests.recall_support import assert_counters_derive_from_slices, index_state

T0 = datetime(2026, 11, 20, 9, 0, tzinfo=UTC)


def document(
    slice_id: str,
    terms: list[str],
    *,
    core_id: str = "agent",
    unit_id: str = "u1",
    ancestors: tuple[str, ...] = ("kitchen", "kitchen->bread"),
    revision: int = 0,
    seq: int = 1,
) -> dict[str, Any]:
    """A slice's document as the indexer writes it (only what the store and the reads use)."""
    return {
        "_id": slice_key(unit_id, slice_id),
        "kind": "slice",
        "core_id": core_id,
        "unit_id": unit_id,
        "slice_id": slice_id,
        "revision": revision,
        "seq": seq,
        "summary": " ".join(terms),
        "start": 0,
        "end": 2,
        "created_at": T0,
        "began_at": T0,
        "ended_at": T0,
        "days": [T0.date().toordinal()],
        "topic": ancestors[-1],
        "path": ancestors[-1],
        "ancestors": list(ancestors),
        "related": [],
        "terms": sorted(terms),
        "weights": dict.fromkeys(terms, 1.0),
        "marks": {term: "0:1.0" for term in terms},
    }


def plan(**changes: Any) -> Plan:
    fields: dict[str, Any] = {
        "idf": {"bread": 1.0},
        "finding": ["bread"],
        "topics": [],
        "parents": [],
        "ranges": [],
        "since": None,
        "until": None,
        "per_channel": 8,
    }
    return Plan(**{**fields, **changes})


async def put(store: RecallStore, piece: dict[str, Any]) -> bool:
    """Write ``piece`` over what the index holds of it, as the indexer does."""
    stored = await store.stored(piece["core_id"], piece["unit_id"], piece["slice_id"])
    return await store.put({**piece, "seq": stored.seq or stored.last_seq + 1}, stored, {})


async def lookup(database: Any, core_id: str, terms: list[str], names: list[str]) -> Any:
    reads = RecallQueries(database).lookup(core_id, terms, names)
    return RecallQueries.looked_up(terms, await asyncio.gather(*reads))


async def test_writing_a_slice_twice_counts_it_once(memory_db: Any) -> None:
    store = RecallStore(memory_db)
    assert await put(store, document("s1", ["bread", "rye"]))
    once = await index_state(memory_db)

    assert not await store.put(document("s1", ["bread", "rye"]), Stored(), {})  # as if read before the write

    assert await index_state(memory_db) == once
    assert (await lookup(memory_db, "agent", ["bread", "rye"], [])).frequencies == {"bread": 1, "rye": 1}


async def test_a_new_revision_moves_the_counters_from_the_nodes_only_the_old_one_held(memory_db: Any) -> None:
    store = RecallStore(memory_db)
    await put(store, document("s1", ["bread", "zeppelin"]))
    await put(store, document("s2", ["bread"], ancestors=("kitchen",)))

    await put(store, document("s1", ["bread", "caraway"], ancestors=("baking",), revision=1))

    found = await lookup(memory_db, "agent", ["bread", "zeppelin", "caraway"], [])
    assert (found.frequencies, found.slices) == ({"bread": 2, "caraway": 1}, 2)
    tree = await RecallQueries(memory_db).tree("agent")
    assert [(row["node"], row["slices"]) for row in tree] == [("baking", 1), ("kitchen", 1)]
    await assert_counters_derive_from_slices(memory_db)


async def test_removing_units_removes_their_slices_and_the_nodes_only_they_held(memory_db: Any) -> None:
    store = RecallStore(memory_db)
    await put(store, document("s1", ["bread", "secret"], unit_id="gone", ancestors=("secret",)))
    await put(store, document("s2", ["bread"], unit_id="kept", ancestors=("kitchen",)))

    assert await store.remove_units("agent", ["gone"]) == 1

    counters, slices = await index_state(memory_db)
    assert [row["slice_id"] for row in slices] == ["s2"]
    assert ("agent", "node", "secret") not in counters
    assert counters[("agent", "core", "")][0] == 1
    await assert_counters_derive_from_slices(memory_db)


async def test_removing_every_slice_of_a_core_leaves_no_document_of_it(memory_db: Any) -> None:
    store = RecallStore(memory_db)
    await put(store, document("s1", ["bread"], unit_id="u1"))
    await put(store, document("s2", ["bread"], unit_id="u2", seq=2))

    assert await store.remove_units("agent", ["u1", "u2"]) == 2

    assert await index_state(memory_db) == ({}, [])


async def test_removing_units_that_were_never_indexed_removes_nothing(memory_db: Any) -> None:
    store = RecallStore(memory_db)
    await put(store, document("s1", ["bread"]))
    before = await index_state(memory_db)

    assert await store.remove_units("agent", ["never"]) == 0 and await store.remove_units("agent", []) == 0
    assert await store.remove_units("other", ["u1"]) == 0  # a unit is removed from its own core only
    assert await index_state(memory_db) == before


async def test_the_lookup_counts_terms_the_core_and_the_nodes_the_words_name(memory_db: Any) -> None:
    store = RecallStore(memory_db)
    await put(store, document("s1", ["bread", "rye"]))
    await put(store, document("s2", ["bread"], ancestors=("garden",), unit_id="u2"))
    await put(store, document("s3", ["bread"], core_id="other", unit_id="u3"))

    found = await lookup(memory_db, "agent", ["bread", "rye", "unknown"], ["bread"])

    assert found.frequencies == {"bread": 2, "rye": 1} and (found.slices, found.last_seq) == (2, 2)
    assert [node.path for node in found.nodes] == ["kitchen->bread"]


async def test_a_terms_count_stops_past_the_slices_that_make_it_common(memory_db: Any) -> None:
    store = RecallStore(memory_db)
    for n in range(COMMON_TERM_SLICES + 3):
        await put(store, document(f"s{n}", ["bread"] + (["rye"] if n < 3 else []), unit_id=f"u{n}"))

    found = await lookup(memory_db, "agent", ["bread", "rye"], [])

    assert found.frequencies == {"bread": COMMON_TERM_SLICES + 1, "rye": 3}
    assert found.slices == COMMON_TERM_SLICES + 3


async def test_candidates_come_from_the_core_asked_only(memory_db: Any) -> None:
    store = RecallStore(memory_db)
    await put(store, document("mine", ["bread"]))
    await put(store, document("theirs", ["bread"], core_id="other", unit_id="u2"))
    queries = RecallQueries(memory_db)

    found = await queries.candidates("agent", plan())
    newest = await queries.candidates("agent", replace(plan(idf={}, finding=[]), newest=True, last_seq=1))

    assert [row["slice_id"] for row in found["text"]] == ["mine"]
    assert [row["slice_id"] for row in newest["recent"]] == ["mine"]


async def test_candidates_bring_only_the_marks_of_the_querys_terms(memory_db: Any) -> None:
    await put(RecallStore(memory_db), document("s1", ["bread", "rye", "caraway"]))

    [row] = (await RecallQueries(memory_db).candidates("agent", plan()))["text"]

    assert set(row["marks"]) == {"bread"} and "weights" not in row and "terms" not in row


async def test_a_node_is_named_by_its_own_name_not_its_parents(memory_db: Any) -> None:
    store = RecallStore(memory_db)
    for n in range(6):
        ancestors = ("orchard", f"orchard->souvenir{n}")
        await put(store, document(f"s{n}", ["orchard"], ancestors=ancestors, unit_id=f"u{n}"))

    found = await lookup(memory_db, "agent", ["orchard"], ["orchard"])

    assert _named(found.nodes, ["orchard"]) == ["orchard"]  # not the six children under it


async def test_at_most_four_named_nodes_come_the_deepest_first(memory_db: Any) -> None:
    store = RecallStore(memory_db)
    places = [
        ("orchard",),
        *((f"farm{n}", f"farm{n}->orchard") for n in range(5)),
        ("a", "a->b", "a->b->orchard"),
    ]
    for n, ancestors in enumerate(places):
        await put(store, document(f"s{n}", ["apple"], ancestors=ancestors, unit_id=f"u{n}"))

    found = await lookup(memory_db, "agent", ["apple", "orchard"], ["apple", "orchard"])

    assert _named(found.nodes, ["apple", "orchard"]) == [
        "a->b->orchard",
        "farm0->orchard",
        "farm1->orchard",
        "farm2->orchard",
    ]
