"""Keyset pagination of SliceQueries.find: complete, ordered, stable under appends; tamper-proof cursors."""

from __future__ import annotations

import base64
import json
from datetime import timedelta
from typing import Any

import pytest

from partner_repo import (
    InvalidCursor,
    MemoryUnitRepository,
    Message,
    SliceQueries,
    SliceView,
    in_memory_database,
)
from partner_repo.admin._cursor import CursorCodec, SliceKey
from tests.unit.admin.support import at, seed_unit


async def walk(queries: SliceQueries, limit: int, **filters: Any) -> list[SliceView]:
    """Every page of a query, following next_cursor until it is None."""
    seen: list[SliceView] = []
    after = None
    while True:
        page = await queries.find(limit=limit, after=after, **filters)
        seen += page.items
        after = page.next_cursor
        if after is None:
            return seen


def sort_key(view: SliceView) -> tuple[Any, int, int, str, str]:
    """The walk's order: time, then position in the core, then in the unit, then the ids."""
    position = -1 if view.first_position is None else view.first_position
    return (view.created_at, position, view.start_index or 0, view.id, view.unit_id)


@pytest.fixture
async def tied(database: Any) -> Any:
    """Slices with many equal creation times, across and within units, so ties must be broken by position
    and then by id."""
    for unit in range(4):
        await seed_unit(
            database,
            f"u{unit}",
            "c" if unit < 3 else "other",
            [(f"s{unit}-{n:02d}", at(n // 3), f"summary {unit} {n}") for n in range(10)],
            messages_per_slice=1,
        )
    return database


@pytest.mark.parametrize("order", ["desc", "asc"])
@pytest.mark.parametrize("limit", [1, 3, 7, 40, 41])
async def test_walking_every_page_returns_each_slice_exactly_once_in_order(
    tied: Any, order: str, limit: int
) -> None:
    queries = SliceQueries(tied)

    seen = await walk(queries, limit, order=order)

    expected = sorted(seen, key=sort_key, reverse=order == "desc")
    assert seen == expected
    assert len({(v.unit_id, v.id) for v in seen}) == len(seen) == 40


async def test_a_walk_with_filters_returns_exactly_the_matching_slices(tied: Any) -> None:
    queries = SliceQueries(tied)
    filters: dict[str, Any] = {"core_id": "c", "created_from": at(1), "created_to": at(3), "text": "summary"}

    seen = await walk(queries, 4, **filters)

    everything = (await queries.find(limit=500, **filters)).items
    assert [v.id for v in seen] == [v.id for v in everything]
    assert len(seen) == await queries.count(**filters) == 18


async def test_the_last_page_has_no_cursor_even_when_it_is_full(tied: Any) -> None:
    queries = SliceQueries(tied)

    first = await queries.find(limit=20)
    second = await queries.find(limit=20, after=first.next_cursor)

    assert first.next_cursor is not None
    assert len(second.items) == 20 and second.next_cursor is None


async def test_the_page_size_may_change_during_a_walk(tied: Any) -> None:
    queries = SliceQueries(tied)
    first = await queries.find(limit=5)

    rest = await queries.find(limit=100, after=first.next_cursor)

    assert len(first.items) + len(rest.items) == 40
    assert not {v.id for v in first.items} & {v.id for v in rest.items}


@pytest.mark.parametrize("order", ["desc", "asc"])
async def test_slices_appended_during_a_walk_never_repeat_or_hide_existing_ones(
    database: Any, order: str
) -> None:
    units = MemoryUnitRepository(database)
    for n in range(30):
        await units.append(
            f"u{n % 3}", [Message(role="user", content=f"m{n}")], f"old {n}", core_id="c", created_at=at(n)
        )
    queries = SliceQueries(database)
    original = {v.id for v in (await queries.find(limit=500)).items}
    seen: list[SliceView] = []
    after = None
    step = 0
    while True:
        page = await queries.find(limit=4, after=after, order=order)  # type: ignore[arg-type]
        seen += page.items
        step += 1
        # between pages: new slices at the newest end, in the middle of the walk, and into a new unit
        await units.append(
            "u0",
            [Message(role="user", content=f"new {step}")],
            f"new {step}",
            core_id="c",
            created_at=at(100 + step),
        )
        await units.append(
            f"late{step}",
            [Message(role="user", content="x")],
            f"mid {step}",
            core_id="c",
            created_at=at(15) + timedelta(seconds=step),
        )
        after = page.next_cursor
        if after is None:
            break

    ids = [v.id for v in seen]
    assert len(ids) == len(set(ids))
    assert original <= set(ids)
    assert seen == sorted(seen, key=sort_key, reverse=order == "desc")


# -- cursors -----------------------------------------------------------------------------------------------


async def a_cursor(database: Any, **filters: Any) -> str:
    page = await SliceQueries(database).find(limit=2, **filters)
    assert page.next_cursor is not None
    return page.next_cursor


@pytest.mark.parametrize(
    "other",
    [
        {"core_id": "other"},
        {"order": "asc"},
        {"text": "summary"},
        {"created_from": at(0)},
        {"created_to": at(100)},
        {"unit_id": "u0"},
    ],
)
async def test_a_cursor_from_another_query_is_refused(tied: Any, other: dict[str, Any]) -> None:
    cursor = await a_cursor(tied)

    with pytest.raises(InvalidCursor, match="another query"):
        await SliceQueries(tied).find(after=cursor, **other)


async def test_an_edited_cursor_is_refused(tied: Any) -> None:
    cursor = await a_cursor(tied, core_id="c")
    body, signature = cursor.split(".")
    payload = json.loads(base64.urlsafe_b64decode(body + "=" * (-len(body) % 4)))
    payload["t"] -= 60_000  # jump a minute back in the walk
    forged_body = base64.urlsafe_b64encode(json.dumps(payload).encode()).rstrip(b"=").decode()

    with pytest.raises(InvalidCursor, match="altered"):
        await SliceQueries(tied).find(core_id="c", after=f"{forged_body}.{signature}")


async def test_a_cursor_with_any_character_changed_is_refused(tied: Any) -> None:
    cursor = await a_cursor(tied)
    alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"

    for position in range(0, len(cursor), 7):
        if cursor[position] == ".":
            continue
        replacement = alphabet[(alphabet.index(cursor[position]) + 1) % len(alphabet)]
        changed = cursor[:position] + replacement + cursor[position + 1 :]
        with pytest.raises(InvalidCursor):
            await SliceQueries(tied).find(after=changed)


@pytest.mark.parametrize("garbage", ["", "x", "a.b.c", "!!!.???", "." * 3, "e30.AAAA", "a" * 5000])
async def test_a_malformed_cursor_is_refused(tied: Any, garbage: str) -> None:
    with pytest.raises(InvalidCursor):
        await SliceQueries(tied).find(after=garbage)


async def test_a_cursor_that_is_not_a_string_is_refused(tied: Any) -> None:
    with pytest.raises(InvalidCursor, match="is a string"):
        await SliceQueries(tied).find(after={"t": 0})  # type: ignore[arg-type]


async def test_a_cursor_signed_with_another_secret_is_refused(tied: Any) -> None:
    cursor = await a_cursor(tied)

    with pytest.raises(InvalidCursor, match="altered"):
        await SliceQueries(tied, cursor_secret="our own secret").find(after=cursor)


async def test_a_cursor_forged_with_the_default_key_is_refused_when_a_secret_is_set(tied: Any) -> None:
    queries = SliceQueries(tied, cursor_secret=b"s3cret")
    fingerprint_source = await queries.find(limit=1)
    assert fingerprint_source.next_cursor is not None
    forged = CursorCodec(str(tied.name)).encode(
        SliceKey(created_at=at(0), slice_id="s0-00", unit_id="u0"),
        json.loads(base64.urlsafe_b64decode(fingerprint_source.next_cursor.split(".")[0] + "==="))["f"],
    )

    with pytest.raises(InvalidCursor, match="altered"):
        await queries.find(after=forged)


async def test_a_cursor_from_another_database_is_refused(tied: Any) -> None:
    cursor = await a_cursor(tied)
    elsewhere = in_memory_database("some_other_database")
    await seed_unit(elsewhere, "u0", "c", [("x", at(0), "x")])

    with pytest.raises(InvalidCursor):
        await SliceQueries(elsewhere).find(after=cursor)


def test_cursor_times_round_trip_to_the_millisecond() -> None:
    codec = CursorCodec("db")
    key = SliceKey(created_at=at(0) + timedelta(milliseconds=999), slice_id="s", unit_id="u")

    assert codec.decode(codec.encode(key, "f"), "f") == key
