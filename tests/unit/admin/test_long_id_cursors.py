"""Page cursors hold any id the API accepts: up to MAX_ID_LENGTH characters of any text, astral ones included.

Stored slices whose ids are longer (written by other tools) are still listed: a page ends before them when no
cursor could name them, so a walk still returns every slice once.
"""

from __future__ import annotations

import uuid
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from bson import Timestamp
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from partner_repo import InvalidCursor, InvalidInput, SliceQueries, in_memory_database, init_repository
from partner_repo.admin._cursor import MAX_CURSOR_LENGTH, CursorCodec, ReadTime, SliceKey
from partner_repo.models import MAX_ID_LENGTH
from tests.unit.admin.support import T0, insert_raw, raw_unit, seed_unit

FINGERPRINT = "f" * 32
ANY_TEXT = st.characters(exclude_categories=["Cs"])  # every code point a string can store
ASTRAL = st.characters(min_codepoint=0x10000, exclude_categories=["Cs"])

ids = st.one_of(
    st.text(ANY_TEXT, min_size=1, max_size=MAX_ID_LENGTH),
    st.text(ASTRAL, min_size=MAX_ID_LENGTH, max_size=MAX_ID_LENGTH),
    st.text(st.sampled_from('\x00\x01\x1f"\\'), min_size=MAX_ID_LENGTH, max_size=MAX_ID_LENGTH),
).filter(str.strip)

moments = st.datetimes(
    min_value=datetime(1, 1, 1), max_value=datetime(9999, 12, 31, 23, 59, 59, 999000), timezones=st.just(UTC)
).map(lambda moment: moment.replace(microsecond=moment.microsecond // 1000 * 1000))


read_times = st.none() | st.builds(
    ReadTime,
    st.builds(Timestamp, st.integers(0, 2**32 - 1), st.integers(0, 2**32 - 1)),
    st.none()
    | st.fixed_dictionaries({"clusterTime": st.just(Timestamp(1, 1)), "hash": st.binary(max_size=64)}),
)


@settings(max_examples=200)
@given(slice_id=ids, unit_id=ids, created_at=moments, read_at=read_times)
def test_a_cursor_naming_any_ids_within_the_limit_decodes_to_its_position(
    slice_id: str, unit_id: str, created_at: datetime, read_at: ReadTime | None
) -> None:
    codec = CursorCodec("partner")
    key = SliceKey(created_at=created_at, slice_id=slice_id, unit_id=unit_id, read_at=read_at)

    cursor = codec.encode(key, FINGERPRINT)

    assert len(cursor) <= MAX_CURSOR_LENGTH
    assert codec.decode(cursor, FINGERPRINT) == key


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(names=st.lists(ids, min_size=5, max_size=5, unique=True))
async def test_a_walk_over_slices_with_ids_up_to_the_limit_continues_through_every_page(
    names: list[str],
) -> None:
    first_unit, second_unit, *slice_ids = names
    database = await init_repository(in_memory_database(f"ids_{uuid.uuid4().hex[:8]}"))
    await seed_unit(database, first_unit, "c", [(slice_ids[0], T0, "one"), (slice_ids[1], T0, "two")])
    await seed_unit(database, second_unit, "c", [(slice_ids[2], T0, "three")])
    queries = SliceQueries(database)

    walked, after = [], None
    for _ in range(4):
        page = await queries.find(core_id="c", limit=1, after=after)
        walked += [(item.id, item.unit_id) for item in page.items]
        after = page.next_cursor
        if after is None:
            break

    expected = {(slice_ids[0], first_unit), (slice_ids[1], first_unit), (slice_ids[2], second_unit)}
    assert after is None and len(walked) == 3 and set(walked) == expected


def test_a_cursor_of_the_walk_order_before_positions_is_refused_saying_to_start_again() -> None:
    """A version-1 cursor names a place in the order by time then id; the walk now orders ties by position,
    so resuming from it could skip slices: it is refused, never misread."""
    # ASCII-escaped JSON naming slice "slïce-😀" of unit "漢字-unit" at 2024-03-01T09:00Z, version 1
    issued_by_an_earlier_release = (
        "eyJmIjoiZmZmZmZmZmZmZmZmZmZmZmZmZmZmZmZmZmZmZmZmZmYiLCJzIjoic2xcdTAwZWZjZS1cdWQ4M2RcdWRlMDAiLCJ0Ijo"
        "xNzA5MjgzNjAwMDAwLCJ1IjoiXHU2ZjIyXHU1YjU3LXVuaXQiLCJ2IjoxfQ.HBCuU9wKVi2x8biAS1_DlQ"
    )

    with pytest.raises(InvalidCursor, match="start the walk again"):
        CursorCodec("partner").decode(issued_by_an_earlier_release, FINGERPRINT)


def test_a_cursor_names_the_place_of_its_slice_in_the_walk() -> None:
    key = SliceKey(
        created_at=datetime(2024, 3, 1, 9, 0, tzinfo=UTC),
        slice_id="slïce-😀",
        unit_id="漢字-unit",
        position=1_234,
        start=12,
    )
    codec = CursorCodec("partner")

    assert codec.decode(codec.encode(key, FINGERPRINT), FINGERPRINT) == key


def test_a_token_longer_than_any_cursor_is_refused_unread() -> None:
    from partner_repo import InvalidCursor

    with pytest.raises(InvalidCursor, match="malformed"):
        CursorCodec("partner").decode("a" * (MAX_CURSOR_LENGTH + 1) + ".b", FINGERPRINT)


def long_slice(slice_id: str, minutes: int) -> dict[str, Any]:
    return {
        "id": slice_id,
        "start_index": 0,
        "end_index": 1,
        "summary": "written elsewhere",
        "created_at": T0 + timedelta(minutes=minutes),
    }


async def test_stored_slices_with_ids_over_the_limit_are_each_walked_once(memory_db: Any) -> None:
    too_long = "x" * (MAX_ID_LENGTH + 1)
    pieces = [long_slice(f"short-{n}" if n % 3 == 1 else f"{too_long}-{n}", n) for n in range(9)]
    await insert_raw(memory_db, raw_unit("foreign", slices=pieces))
    queries = SliceQueries(memory_db)

    walked, after, pages = [], None, 0
    while True:
        page = await queries.find(core_id="c", limit=3, after=after)
        walked += [item.id for item in page.items]
        pages += 1
        after = page.next_cursor
        if after is None:
            break

    assert walked == [p["id"] for p in reversed(pieces)]
    assert pages > 3  # some pages ended early, on the last slice a cursor could name


async def test_a_page_of_nothing_but_slices_with_ids_over_the_limit_says_it_cannot_continue(
    memory_db: Any,
) -> None:
    too_long = "x" * (MAX_ID_LENGTH + 1)
    pieces = [long_slice(f"{too_long}-{n}", n) for n in range(3)]
    await insert_raw(memory_db, raw_unit("foreign", slices=pieces))

    with pytest.raises(InvalidInput, match=f"longer than {MAX_ID_LENGTH} characters"):
        await SliceQueries(memory_db).find(core_id="c", limit=2)

    page = await SliceQueries(memory_db).find(core_id="c", limit=3)  # a page that holds them all is fine
    assert len(page.items) == 3 and page.next_cursor is None
