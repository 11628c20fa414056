"""SliceQueries.find/count/get/unit: filters, ordering, literal text search and the limit cap.

These tests use the ``database`` fixture, so they are a contract both backends keep.
"""

from __future__ import annotations

from typing import Any

import pytest

from partner_repo import InvalidInput, MemoryUnitRepository, Message, NotFound, SliceQueries
from partner_repo.admin import MAX_LIMIT
from tests.unit.admin.support import at, seed_unit


@pytest.fixture
async def seeded(database: Any) -> Any:
    """Two cores, three units, slices at known minutes."""
    await seed_unit(database, "u1", "alice", [("a1", at(1), "Kyoto trip"), ("a2", at(5), "Maple leaves")])
    await seed_unit(database, "u2", "alice", [("b1", at(3), "Train tickets"), ("b2", at(7), "kyoto HOTEL")])
    await seed_unit(database, "u3", "bob", [("c1", at(2), "Bob's garden"), ("c2", at(6), "Tomato plants")])
    return database


def ids(page: Any) -> list[str]:
    return [item.id for item in page.items]


async def test_find_lists_every_slice_newest_first_by_default(seeded: Any) -> None:
    page = await SliceQueries(seeded).find()

    assert ids(page) == ["b2", "c2", "a2", "b1", "c1", "a1"]
    assert page.next_cursor is None


async def test_find_in_ascending_order_lists_oldest_first(seeded: Any) -> None:
    page = await SliceQueries(seeded).find(order="asc")

    assert ids(page) == ["a1", "c1", "b1", "a2", "c2", "b2"]


async def test_a_slice_view_carries_its_unit_core_interval_and_message_count(seeded: Any) -> None:
    page = await SliceQueries(seeded).find(unit_id="u2", order="asc")

    first = page.items[0]
    assert (first.id, first.unit_id, first.core_id) == ("b1", "u2", "alice")
    assert (first.start_index, first.end_index, first.message_count) == (0, 2, 2)
    assert first.summary == "Train tickets" and first.created_at == at(3)
    assert first.memory_slice().id == "b1"


async def test_find_filters_by_core(seeded: Any) -> None:
    page = await SliceQueries(seeded).find(core_id="bob")

    assert ids(page) == ["c2", "c1"]
    assert {item.core_id for item in page.items} == {"bob"}


async def test_find_filters_by_unit(seeded: Any) -> None:
    assert ids(await SliceQueries(seeded).find(unit_id="u1")) == ["a2", "a1"]


async def test_created_from_is_inclusive_and_created_to_exclusive(seeded: Any) -> None:
    page = await SliceQueries(seeded).find(created_from=at(2), created_to=at(6), order="asc")

    assert ids(page) == ["c1", "b1", "a2"]


async def test_filters_combine(seeded: Any) -> None:
    queries = SliceQueries(seeded)

    assert ids(await queries.find(core_id="alice", created_from=at(4))) == ["b2", "a2"]
    assert ids(await queries.find(core_id="alice", unit_id="u3")) == []


async def test_text_is_a_case_insensitive_substring_of_the_summary(seeded: Any) -> None:
    page = await SliceQueries(seeded).find(text="KYOTO")

    assert ids(page) == ["b2", "a1"]


@pytest.mark.parametrize("text", [".*", "$where", '{"$ne": ""}', "(", "[a-z]+", "\\", "^Kyoto$", "a|b"])
async def test_text_is_taken_literally_never_as_a_pattern_or_operator(database: Any, text: str) -> None:
    await seed_unit(database, "u", "c", [("plain", at(1), "nothing special"), ("lit", at(2), f"x {text} y")])

    page = await SliceQueries(database).find(text=text)

    assert ids(page) == ["lit"]


async def test_a_text_that_is_not_a_string_is_refused(seeded: Any) -> None:
    with pytest.raises(InvalidInput, match="text must be a string"):
        await SliceQueries(seeded).find(text={"$ne": ""})  # type: ignore[arg-type]


async def test_a_nul_character_in_text_is_matched_literally(database: Any) -> None:
    await seed_unit(database, "u", "c", [("nul", at(1), "a\x00b"), ("other", at(2), "ab")])

    assert ids(await SliceQueries(database).find(text="a\x00b")) == ["nul"]


async def test_limit_is_capped_at_500(database: Any) -> None:
    for unit in range(3):
        await seed_unit(
            database,
            f"u{unit}",
            "c",
            [(f"s{unit}-{n}", at(n), "many") for n in range(200)],
            messages_per_slice=1,
        )

    page = await SliceQueries(database).find(limit=10_000)

    assert len(page.items) == MAX_LIMIT == 500
    assert page.next_cursor is not None


@pytest.mark.parametrize("limit", [0, -1, True, 2.5, "10"])
async def test_a_limit_that_is_not_a_positive_integer_is_refused(seeded: Any, limit: Any) -> None:
    with pytest.raises(InvalidInput, match="limit"):
        await SliceQueries(seeded).find(limit=limit)


async def test_an_unknown_order_is_refused(seeded: Any) -> None:
    with pytest.raises(InvalidInput, match="order must be"):
        await SliceQueries(seeded).find(order="newest")  # type: ignore[arg-type]


async def test_a_reversed_time_range_is_refused(seeded: Any) -> None:
    with pytest.raises(InvalidInput, match="after created_to"):
        await SliceQueries(seeded).find(created_from=at(5), created_to=at(1))


async def test_a_naive_datetime_filter_is_taken_as_utc(seeded: Any) -> None:
    naive = at(2).replace(tzinfo=None)

    assert ids(await SliceQueries(seeded).find(created_to=naive)) == ["a1"]


async def test_count_uses_the_same_filters_as_find(seeded: Any) -> None:
    queries = SliceQueries(seeded)

    assert await queries.count() == 6
    assert await queries.count(core_id="alice") == 4
    assert await queries.count(core_id="alice", text="kyoto") == 2
    assert await queries.count(created_from=at(2), created_to=at(6)) == 3
    assert await queries.count(unit_id="nobody") == 0


async def test_get_returns_the_slice_with_its_ids_and_exactly_its_messages(database: Any) -> None:
    units = MemoryUnitRepository(database)
    await units.append("u", [Message(role="user", content="one")], "first", core_id="c", slice_id="s1")
    await units.append(
        "u",
        [Message(role="user", content="two"), Message(role="assistant", content="three")],
        "second",
        core_id="c",
        slice_id="s2",
    )

    detail = await SliceQueries(database).get("s2")

    assert (detail.id, detail.unit_id, detail.core_id, detail.summary) == ("s2", "u", "c", "second")
    assert [m.content for m in detail.messages] == ["two", "three"]
    assert detail.message_count == 2


async def test_get_of_an_unknown_slice_answers_none(seeded: Any) -> None:
    assert await SliceQueries(seeded).get("missing") is None


async def test_require_of_an_unknown_slice_raises_not_found(seeded: Any) -> None:
    with pytest.raises(NotFound, match="no slice 'missing'"):
        await SliceQueries(seeded).require("missing")


async def test_require_of_a_slice_is_what_get_answers(seeded: Any) -> None:
    required = await SliceQueries(seeded).require("a1")

    assert required == await SliceQueries(seeded).get("a1")


async def test_unit_shows_counts_size_and_slices_without_messages(seeded: Any) -> None:
    view = await SliceQueries(seeded).unit("u1")

    assert (view.id, view.core_id, view.message_count, view.version) == ("u1", "alice", 4, 1)
    assert [s.id for s in view.slices] == ["a1", "a2"]
    assert view.size_bytes is not None and view.share_of_limit == view.size_bytes / (16 * 1024 * 1024)
    assert view.updated_at == at(5)


async def test_unit_of_an_unknown_id_raises_not_found(seeded: Any) -> None:
    with pytest.raises(NotFound, match="no unit 'nobody'"):
        await SliceQueries(seeded).unit("nobody")


async def test_units_without_slices_do_not_appear(database: Any) -> None:
    await seed_unit(database, "empty", "c", [])

    assert (await SliceQueries(database).find()).items == []


async def test_messages_reads_a_range_of_a_units_messages(seeded: Any) -> None:
    queries = SliceQueries(seeded)

    messages = await queries.messages("u1", 1, 3)

    assert [m.content for m in messages] == ["u1/a1 message 1", "u1/a2 message 0"]
    assert await queries.messages("u1", 3, 3) == []
    with pytest.raises(NotFound, match="no unit 'nobody'"):
        await queries.messages("nobody", 0, 1)
