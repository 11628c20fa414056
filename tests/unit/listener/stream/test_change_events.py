"""Reading change events: every form in which an appended slice appears, and what adds no slice."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from partner_repo.listener.stream._change_stream import parse_event

CREATED = datetime(2024, 5, 1, 9, 0)  # naive, as a driver without tz_aware returns it


def slice_doc(slice_id: str, start: int, end: int, **extra: Any) -> dict[str, Any]:
    return {
        "id": slice_id,
        "start_index": start,
        "end_index": end,
        "summary": f"sum {slice_id}",
        "created_at": CREATED,
        "rolling_size": None,
        "retain_divisor": None,
        **extra,
    }


def update(fields: dict[str, Any], **description: Any) -> dict[str, Any]:
    return {
        "_id": {"_data": "8265"},
        "operationType": "update",
        "ns": {"db": "partner", "coll": "memory_units"},
        "documentKey": {"_id": "u1"},
        "updateDescription": {
            "updatedFields": fields,
            "removedFields": [],
            "truncatedArrays": [],
            **description,
        },
    }


def test_an_append_at_the_end_shows_as_a_numbered_slices_key() -> None:
    change = parse_event(
        update(
            {
                "conversation_messages.4": {"role": "user", "content": "x"},
                "conversation_messages.5": {"role": "assistant", "content": "y"},
                "slices.2": slice_doc("s3", 4, 6, rolling_size=8, retain_divisor=6),
                "message_count": 6,
                "slice_count": 3,
                "size_bytes": 900,
                "version": 4,
                "updated_at": CREATED,
            }
        )
    )

    assert (change.kind, change.unit_id, change.core_id) == ("slices", "u1", None)
    (piece,) = change.slices
    assert (piece.id, piece.start_index, piece.end_index, piece.rolling_size) == ("s3", 4, 6, 8)
    assert piece.created_at is not None and piece.created_at.tzinfo is not None


def test_an_append_into_the_middle_shows_as_the_whole_slices_array() -> None:
    change = parse_event(
        update(
            {
                "slices": [slice_doc("late", 4, 6), slice_doc("s1", 0, 2), slice_doc("s2", 2, 4)],
                "version": 4,
            }
        )
    )

    assert change.kind == "slices"
    assert [s.id for s in change.slices] == ["late", "s1", "s2"]


def test_an_inserted_unit_brings_its_slices_and_core() -> None:
    change = parse_event(
        {
            "_id": {"_data": "01"},
            "operationType": "insert",
            "documentKey": {"_id": "u1"},
            "fullDocument": {"_id": "u1", "core_id": "agent", "slices": [slice_doc("s1", 0, 2)]},
        }
    )

    assert (change.kind, change.unit_id, change.core_id) == ("slices", "u1", "agent")
    assert [s.id for s in change.slices] == ["s1"]


def test_a_replaced_unit_brings_all_its_slices() -> None:
    change = parse_event(
        {
            "_id": {"_data": "02"},
            "operationType": "replace",
            "documentKey": {"_id": "u1"},
            "fullDocument": {
                "_id": "u1",
                "core_id": "agent",
                "slices": [slice_doc("a", 0, 1), slice_doc("b", 1, 3)],
            },
        }
    )

    assert [s.id for s in change.slices] == ["a", "b"]


def test_a_change_inside_an_existing_slice_asks_for_the_unit_to_be_reread() -> None:
    assert parse_event(update({"slices.1.summary": "edited"})).kind == "resync"


def test_a_slice_without_an_id_asks_for_the_unit_to_be_reread() -> None:
    assert parse_event(update({"slices.0": {"summary": "raw", "start_index": 0}})).kind == "resync"


def test_an_insert_without_its_document_asks_for_the_unit_to_be_reread() -> None:
    assert parse_event({"_id": {}, "operationType": "insert", "documentKey": {"_id": "u1"}}).kind == "resync"


def test_updates_that_touch_no_slice_add_nothing() -> None:
    change = parse_event(update({"version": 9}, truncatedArrays=[{"field": "slices", "newSize": 1}]))
    assert change.kind == "none" and change.slices == ()


def test_deletes_and_drops_add_nothing_and_invalidate_is_recognised() -> None:
    assert parse_event({"operationType": "delete", "documentKey": {"_id": "u1"}}).kind == "none"
    assert parse_event({"operationType": "drop"}).kind == "none"
    assert parse_event({"_id": {"_data": "ff"}, "operationType": "invalidate"}).kind == "invalidate"


def test_the_insert_of_an_erased_units_tombstone_adds_nothing() -> None:
    change = parse_event(
        {
            "_id": {"_data": "03"},
            "operationType": "insert",
            "documentKey": {"_id": "u1"},
            "fullDocument": {"_id": "u1", "erased_at": CREATED},
        }
    )

    assert (change.kind, change.unit_id, change.slices) == ("none", "u1", ())
