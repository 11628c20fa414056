"""The unique slice-id indexes of 0.1 and 0.3 (replaced by slice-id claims since, see docs/sharding.md),
checked against MongoDB's documented index-key rules (``index_semantics``): a database not migrated yet still
has one.

Neither mongomock (no unique multikey) nor SecantusDB (no null key for a missing element field) shows what a
real server refuses here, so these tests read the definitions as the manual does.
"""

from __future__ import annotations

from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from partner_repo import MemoryUnit, MemoryUnitRepository, Message, normalize_unit
from partner_repo.mongo import UNITS, unit_document
from tests.unit.migrations.index_semantics import NULL, collisions
from tests.unit.migrations.support import SLICE_IDS, SLICE_INDEX, load

INDEX_OF_0_3 = load(SLICE_INDEX).NEW_INDEX.document
INDEX_OF_0_1 = load(SLICE_INDEX).OLD_INDEX.document
slice_ids_of = load(SLICE_IDS).slice_ids_of


def unit(unit_id: str, *slice_ids: str | None) -> dict[str, Any]:
    """A stored unit whose slices carry these ids (None: a slice without one, as other tools write)."""
    slices = [{"summary": "s"} if i is None else {"id": i, "summary": "s"} for i in slice_ids]
    document = {"_id": unit_id, "core_id": "c", "slices": slices}
    return {**document, "slice_ids": slice_ids_of(document)}


def test_the_index_of_0_1_gives_slices_without_an_id_a_shared_null_key() -> None:
    found = collisions([unit("one", "a", None), unit("two", "b", None)], INDEX_OF_0_1)

    assert found == [(NULL, "one", "two")]


def test_units_holding_slices_without_an_id_never_collide_on_the_index_of_0_3() -> None:
    assert (
        collisions([unit("one", "a", None), unit("two", "b", None), unit("three", None)], INDEX_OF_0_3) == []
    )


def test_units_without_slices_are_left_out_of_the_index_of_0_3() -> None:
    assert collisions([unit("empty-1"), unit("empty-2")], INDEX_OF_0_3) == []
    unfiltered = {**INDEX_OF_0_3, "partialFilterExpression": None}
    assert collisions([unit("empty-1"), unit("empty-2")], unfiltered) != []  # why the filter is there


def test_a_slice_id_in_two_units_still_collides_on_the_index_of_0_3() -> None:
    assert collisions([unit("one", "a", "shared"), unit("two", "shared")], INDEX_OF_0_3) == [
        ("shared", "one", "two")
    ]


@given(
    st.lists(
        st.lists(st.one_of(st.none(), st.text(min_size=1, max_size=3)), max_size=4),
        min_size=2,
        max_size=5,
    )
)
def test_the_index_of_0_3_collides_exactly_on_ids_held_by_two_units(
    layouts: list[list[str | None]],
) -> None:
    documents = [unit(f"u{n}", *ids) for n, ids in enumerate(layouts)]
    holders: dict[str, set[str]] = {}
    for document in documents:
        for slice_id in document["slice_ids"]:
            holders.setdefault(slice_id, set()).add(document["_id"])

    shared = {key for key, _, _ in collisions(documents, INDEX_OF_0_3)}

    assert shared == {slice_id for slice_id, owners in holders.items() if len(owners) > 1}


async def test_every_write_path_stores_exactly_the_ids_of_the_units_slices(memory_db: Any) -> None:
    units = MemoryUnitRepository(memory_db)
    await units.append("appended", [Message(role="user", content="hi")], "first", core_id="c")
    await units.append("appended", [Message(role="user", content="again")], "second", core_id="c")
    await units.save(MemoryUnit(id="saved", core_id="c", conversation_messages=[], slices=[]))
    await memory_db[UNITS].insert_one({"_id": "foreign", "core_id": "c", "slices": [{"summary": "no id"}]})
    await units.head("foreign")  # adopted: stored normalized, its slice given an id

    async for document in memory_db[UNITS].find({}):
        assert document["slice_ids"] == [s["id"] for s in document["slices"]]
        assert all(isinstance(i, str) for i in document["slice_ids"])
        assert collisions([document], INDEX_OF_0_3) == []


def test_the_stored_form_of_a_normalized_unit_lists_its_slice_ids() -> None:
    normalized = normalize_unit(
        MemoryUnit.model_validate(
            {"id": "u", "core_id": "c", "slices": [{"summary": "a"}, None, {"summary": "b"}]}
        )
    )

    document = unit_document(normalized)

    assert document["slice_ids"] == [s.id for s in normalized.complete_slices()]
    assert document["slice_count"] == 2
