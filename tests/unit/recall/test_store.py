"""``RecallStore``, the recall index in MongoDB: set additions and removals keyed by the slice, so writing a
slice twice counts it once, a new revision moves its counts, and removal leaves no entry behind; each read is
one aggregation under the core."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime
from typing import Any

from partner_repo.recall._store import Plan, RecallStore
from tests.recall_support import assert_vocabulary_derives_from_slices, index_state

T0 = datetime(2026, 11, 20, 9, 0, tzinfo=UTC)


def document(
    slice_id: str,
    terms: list[str],
    *,
    core_id: str = "agent",
    unit_id: str = "u1",
    ancestors: tuple[str, ...] = ("kitchen", "kitchen->bread"),
    revision: int = 0,
) -> dict[str, Any]:
    """A slice's entry as the indexer writes it (only what the store reads)."""
    return {
        "_id": {"u": unit_id, "s": slice_id},
        "core_id": core_id,
        "unit_id": unit_id,
        "slice_id": slice_id,
        "revision": revision,
        "summary": " ".join(terms),
        "start": 0,
        "end": 2,
        "created_at": T0,
        "began_at": T0,
        "ended_at": T0,
        "topic": ancestors[-1],
        "ancestors": list(ancestors),
        "related": [],
        "terms": sorted(terms),
        "weights": dict.fromkeys(terms, 1.0),
        "marks": {term: [[0, 1.0]] for term in terms},
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


async def test_putting_a_slice_twice_counts_it_once(memory_db: Any) -> None:
    store = RecallStore(memory_db)
    await store.put(document("s1", ["bread", "rye"]), None)
    once = await index_state(memory_db)

    await store.put(document("s1", ["bread", "rye"]), await store.stored("u1", "s1"))
    await store.put(document("s1", ["bread", "rye"]), None)  # as if what was stored had not been read

    assert await index_state(memory_db) == once
    assert (await store.lookup("agent", ["bread", "rye"])).frequencies == {"bread": 1, "rye": 1}


async def test_a_new_revision_moves_the_counts_from_what_only_the_old_one_held(memory_db: Any) -> None:
    store = RecallStore(memory_db)
    await store.put(document("s1", ["bread", "zeppelin"]), None)
    await store.put(document("s2", ["bread"], ancestors=("kitchen",)), None)

    new = document("s1", ["bread", "caraway"], ancestors=("baking",), revision=1)
    await store.put(new, await store.stored("u1", "s1"))

    lookup = await store.lookup("agent", ["bread", "zeppelin", "caraway"])
    assert (lookup.frequencies, lookup.slices) == ({"bread": 2, "caraway": 1}, 2)
    assert await store.nodes("agent") == [("baking", 1), ("kitchen", 1)]
    await assert_vocabulary_derives_from_slices(memory_db)


async def test_removing_units_removes_their_slices_and_the_entries_only_they_held(memory_db: Any) -> None:
    store = RecallStore(memory_db)
    await store.put(document("s1", ["bread", "secret"], unit_id="gone"), None)
    await store.put(document("s2", ["bread"], unit_id="kept"), None)

    assert await store.remove_units(["gone"]) == 1

    vocabulary, _ = await index_state(memory_db)
    assert ("agent", "term", "secret") not in vocabulary
    assert vocabulary[("agent", "term", "bread")] == [["kept", "s2"]]
    assert await store.count("agent") == 1


async def test_removing_units_that_were_never_indexed_removes_nothing(memory_db: Any) -> None:
    store = RecallStore(memory_db)
    await store.put(document("s1", ["bread"]), None)
    before = await index_state(memory_db)

    assert await store.remove_units(["never"]) == 0 and await store.remove_units([]) == 0
    assert await index_state(memory_db) == before


async def test_the_lookup_counts_terms_the_core_and_the_nodes_the_words_name(memory_db: Any) -> None:
    store = RecallStore(memory_db)
    await store.put(document("s1", ["bread", "rye"]), None)
    await store.put(document("s2", ["bread"], ancestors=("garden",)), None)
    await store.put(document("s3", ["bread"], core_id="other", unit_id="u2"), None)

    lookup = await store.lookup("agent", ["bread", "rye", "unknown"], ["bread"])

    assert lookup.frequencies == {"bread": 2, "rye": 1} and lookup.slices == 2
    assert lookup.nodes == {"kitchen->bread": 1}


async def test_candidates_come_from_the_core_asked_only(memory_db: Any) -> None:
    store = RecallStore(memory_db)
    await store.put(document("mine", ["bread"]), None)
    await store.put(document("theirs", ["bread"], core_id="other", unit_id="u2"), None)

    found = await store.candidates("agent", plan())
    newest = await store.candidates("agent", replace(plan(idf={}, finding=[]), newest=True))

    assert [row["slice_id"] for row in found["text"]] == ["mine"]
    assert [row["slice_id"] for row in newest["recent"]] == ["mine"]


async def test_candidates_bring_only_the_marks_of_the_querys_terms(memory_db: Any) -> None:
    store = RecallStore(memory_db)
    await store.put(document("s1", ["bread", "rye", "caraway"]), None)

    [row] = (await store.candidates("agent", plan()))["text"]

    assert set(row["marks"]) == {"bread"} and "weights" not in row and "terms" not in row


async def test_the_lookup_names_a_node_by_its_own_name_not_its_parents(memory_db: Any) -> None:
    store = RecallStore(memory_db)
    for n in range(6):
        await store.put(document(f"s{n}", ["orchard"], ancestors=("orchard", f"orchard->souvenir{n}")), None)

    lookup = await store.lookup("agent", ["orchard"], ["orchard"])

    assert lookup.nodes == {"orchard": 6}  # not the six children under it


async def test_the_lookup_brings_back_at_most_four_named_nodes_the_deepest_first(memory_db: Any) -> None:
    store = RecallStore(memory_db)
    places = [
        ("orchard",),
        *((f"farm{n}", f"farm{n}->orchard") for n in range(5)),
        ("a", "a->b", "a->b->orchard"),
    ]
    for n, ancestors in enumerate(places):
        await store.put(document(f"s{n}", ["apple"], ancestors=ancestors), None)

    lookup = await store.lookup("agent", ["apple"], ["orchard", "apple"])

    assert list(lookup.nodes) == ["a->b->orchard", "farm0->orchard", "farm1->orchard", "farm2->orchard"]
