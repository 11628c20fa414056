"""A page cursor carries the cluster time its page was read at, so the next page reads no older data."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from bson import Int64, Timestamp

from partner_repo import SliceQueries
from partner_repo.admin._cursor import MAX_CLUSTER_TIME_BYTES, CursorCodec, ReadTime, SliceKey
from partner_repo.admin._filters import SliceFilter
from tests.unit.admin.support import seed_unit

T0 = datetime(2024, 3, 1, 9, 0, tzinfo=UTC)
CLUSTER_TIME = {
    "clusterTime": Timestamp(1_709_283_600, 9),
    "signature": {"hash": b"\x5a" * 20, "keyId": Int64(7_300_000_000_000_000_001)},
}


def test_a_cursor_round_trips_the_read_time_of_its_page() -> None:
    codec = CursorCodec("partner")
    key = SliceKey(T0, "s", "u", ReadTime(Timestamp(1_709_283_600, 7), CLUSTER_TIME))

    decoded = codec.decode(codec.encode(key, "f"), "f")

    assert decoded == key and decoded.read_at is not None
    assert isinstance(decoded.read_at.cluster_time, dict)
    assert type(decoded.read_at.cluster_time["signature"]["keyId"]) is Int64  # sent back as the server's long


def test_a_cursor_without_a_read_time_decodes_with_none() -> None:
    codec = CursorCodec("partner")

    assert codec.decode(codec.encode(SliceKey(T0, "s", "u"), "f"), "f").read_at is None


def test_an_oversized_cluster_time_is_left_out_and_the_operation_time_kept() -> None:
    codec = CursorCodec("partner")
    huge = {"clusterTime": Timestamp(5, 1), "padding": b"\x00" * MAX_CLUSTER_TIME_BYTES}

    decoded = codec.decode(codec.encode(SliceKey(T0, "s", "u", ReadTime(Timestamp(5, 1), huge)), "f"), "f")

    assert decoded.read_at == ReadTime(Timestamp(5, 1), None)


async def test_pages_of_the_embedded_backend_carry_no_read_time_and_still_continue(memory_db: Any) -> None:
    await seed_unit(memory_db, "u", "c", [("a", T0, "one"), ("b", T0, "two")])
    queries = SliceQueries(memory_db)

    page = await queries.find(limit=1)

    assert page.next_cursor is not None
    fingerprint = SliceFilter.of(None, None, None, None, None).fingerprint
    assert CursorCodec(memory_db.name).decode(page.next_cursor, fingerprint).read_at is None
    assert [item.id for item in (await queries.find(limit=1, after=page.next_cursor)).items] == ["a"]
