"""The stored model: what it accepts, what it refuses, and how it treats time."""

from __future__ import annotations

from dataclasses import FrozenInstanceError
from datetime import UTC, datetime, timedelta, timezone
from typing import Any

import pytest
from bson.tz_util import utc as bson_utc
from pydantic import ValidationError

from partner_repo import (
    MemoryCore,
    MemoryCoreRepository,
    MemorySlice,
    MemoryUnit,
    MemoryUnitRepository,
    Message,
    init_repository,
    to_utc_ms,
)
from partner_repo.mongo import driver

PARIS_SUMMER = timezone(timedelta(hours=2))


# -- Message ------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("role", ["user", "assistant", "system"])
def test_partners_three_roles_are_accepted(role: str) -> None:
    assert Message(role=role, content="hi").role == role  # type: ignore[arg-type]


@pytest.mark.parametrize("role", ["bot", "User", "Tool", "function", "", None, 1])
def test_any_other_role_is_rejected(role: Any) -> None:
    with pytest.raises(ValidationError):
        Message.model_validate({"role": role, "content": "hi"})


@pytest.mark.parametrize("content", [None, 42, 4.2, b"bytes", ["a"], {"text": "a"}])
def test_content_must_be_a_string(content: Any) -> None:
    with pytest.raises(ValidationError):
        Message.model_validate({"role": "user", "content": content})


def test_empty_content_is_a_valid_message() -> None:
    assert Message(role="assistant", content="").content == ""


def test_messages_are_equal_when_role_and_content_are_equal() -> None:
    assert Message(role="user", content="hi") == Message.model_validate({"role": "user", "content": "hi"})
    assert Message(role="user", content="hi") != Message(role="assistant", content="hi")
    assert Message(role="user", content="hi") != Message(role="user", content="hi ")


def test_equal_messages_hash_alike_and_messages_are_immutable() -> None:
    assert len({Message(role="user", content="a"), Message(role="user", content="a")}) == 1
    message = Message(role="user", content="a")
    with pytest.raises(FrozenInstanceError):
        message.content = "b"  # type: ignore[misc]


def test_a_message_refuses_unknown_fields() -> None:
    with pytest.raises(ValidationError):
        Message.model_validate({"role": "user", "content": "a", "speaker": "x"})


def test_a_message_dumps_to_its_stored_form_and_validates_back() -> None:
    message = Message(role="system", content="be brief")
    assert message.model_dump() == {"role": "system", "content": "be brief"}
    assert Message.model_validate(message.model_dump()) == message
    assert Message.model_validate(message) == message


def test_a_message_is_keyword_only_and_carries_no_per_instance_dict() -> None:
    with pytest.raises(ValidationError):
        Message("user", "hi")  # type: ignore[misc]
    assert not hasattr(Message(role="user", content="hi"), "__dict__")


async def test_beanie_insert_stores_messages_in_the_stored_form(memory_db: Any) -> None:
    messages = [Message(role="user", content="hi"), Message(role="assistant", content="hello")]
    await MemoryUnit(id="u-beanie", core_id="c", conversation_messages=messages).insert()
    await MemoryCore(
        id="c", memory_session_id="u-beanie", session_started_at=datetime.now(UTC), chat_messages=messages
    ).insert()
    stored_unit = await memory_db["memory_units"].find_one({"_id": "u-beanie"})
    stored_core = await memory_db["memory_cores"].find_one({"_id": "c"})
    assert stored_unit["conversation_messages"] == [m.model_dump() for m in messages]
    assert stored_core["chat_messages"] == [m.model_dump() for m in messages]
    loaded = await MemoryUnitRepository(memory_db).get("u-beanie")
    assert loaded is not None and loaded.conversation_messages == messages


# -- MemoryUnit ---------------------------------------------------------------------------------------------


def test_a_none_message_is_rejected_by_the_model() -> None:
    with pytest.raises(ValidationError):
        MemoryUnit.model_validate({"id": "u", "core_id": "c", "conversation_messages": [None]})


@pytest.mark.parametrize("field", ["id", "core_id"])
@pytest.mark.parametrize("value", ["", "   ", None, 7])
def test_unit_ids_must_be_non_blank_strings(field: str, value: Any) -> None:
    with pytest.raises(ValidationError):
        MemoryUnit.model_validate({"id": "u", "core_id": "c", field: value})


def test_incomplete_input_is_accepted_and_filled_after_save_by_the_repository() -> None:
    unit = MemoryUnit.model_validate(
        {
            "id": "u",
            "core_id": "c",
            "conversation_messages": [
                {"role": "user", "content": "a"},
                {"role": "assistant", "content": "b"},
            ],
            "slices": [None, {"summary": "no id, no interval, no time"}, {"id": None, "start_index": None}],
            "updated_at": None,
        }
    )
    assert unit.updated_at is None
    assert unit.slices[0] is None
    assert unit.slices[1] == MemorySlice(summary="no id, no interval, no time")


async def test_incomplete_unit_is_complete_once_saved(memory_db: Any) -> None:
    repository = MemoryUnitRepository(memory_db)
    unit = MemoryUnit.model_validate(
        {
            "id": "u",
            "core_id": "c",
            "conversation_messages": [{"role": "user", "content": "a"}],
            "slices": [None, {"summary": "s"}, {"id": "", "end_index": None, "created_at": None}],
        }
    )

    saved = await repository.save(unit)
    stored = await repository.get("u")

    for result in (saved, stored):
        assert result is not None and result.updated_at is not None
        assert len(result.slices) == 2
        for piece in result.slices:
            assert piece is not None
            assert (
                piece.id and piece.start_index == 0 and piece.end_index == 1 and piece.created_at is not None
            )
    raw = await memory_db["memory_units"].find_one({"_id": "u"})
    assert None not in raw["slices"]
    assert all(s["id"] and s["created_at"] is not None for s in raw["slices"])


def test_slice_message_count_is_its_interval_length() -> None:
    assert MemorySlice(start_index=2, end_index=5).message_count == 3
    assert MemorySlice(start_index=None, end_index=5).message_count == 0


# -- time ---------------------------------------------------------------------------------------------------


def test_datetimes_are_kept_as_aware_utc_truncated_to_milliseconds() -> None:
    local = datetime(2024, 6, 1, 14, 30, 15, 123987, tzinfo=PARIS_SUMMER)
    piece = MemorySlice(created_at=local)
    assert piece.created_at == datetime(2024, 6, 1, 12, 30, 15, 123000, tzinfo=UTC)
    assert piece.created_at is not None and piece.created_at.utcoffset() == timedelta(0)
    assert piece.created_at.tzinfo is UTC


def test_a_naive_datetime_is_taken_to_be_utc() -> None:
    unit = MemoryUnit(id="u", core_id="c", updated_at=datetime(2024, 6, 1, 12, 0, 0, 999999))
    assert unit.updated_at == datetime(2024, 6, 1, 12, 0, 0, 999000, tzinfo=UTC)
    assert to_utc_ms(datetime(2024, 1, 1)) == datetime(2024, 1, 1, tzinfo=UTC)


@pytest.mark.parametrize(
    "decoded",
    [
        datetime(2024, 6, 1, 12, 0, 0, 999999, tzinfo=bson_utc),  # Motor with tz_aware=True
        datetime(2024, 6, 1, 12, 0, 0, 999999, tzinfo=UTC),
        datetime(2024, 6, 1, 12, 0, 0, 999999),
        datetime(2024, 6, 1, 14, 0, 0, 999999, tzinfo=PARIS_SUMMER),
    ],
)
def test_every_decoded_datetime_shape_becomes_utc_milliseconds(decoded: datetime) -> None:
    normalized = to_utc_ms(decoded)
    assert normalized == datetime(2024, 6, 1, 12, 0, 0, 999000, tzinfo=UTC)
    assert normalized.tzinfo is UTC
    assert to_utc_ms(normalized) is normalized  # already normalized: returned as is


async def test_datetimes_from_a_naive_backend_read_back_as_aware_utc() -> None:
    naive_db = await init_repository(driver.in_memory_client(tz_aware=False)["naive"])
    units = MemoryUnitRepository(naive_db)
    written = datetime(2024, 6, 1, 14, 30, 15, 123456, tzinfo=PARIS_SUMMER)
    await units.append("u", [Message(role="user", content="a")], "s", core_id="c", created_at=written)
    raw = await naive_db["memory_units"].find_one({"_id": "u"})
    assert raw["updated_at"].tzinfo is None  # the backend really hands back naive values

    unit = await units.get("u")
    piece = await units.get_slice("u", unit.slices[0].id) if unit and unit.slices[0] else None

    expected = datetime(2024, 6, 1, 12, 30, 15, 123000, tzinfo=UTC)
    assert unit is not None and unit.updated_at == expected and unit.updated_at.tzinfo is UTC
    assert piece is not None and piece.created_at == expected and piece.created_at.tzinfo is UTC
    head = await units.head("u")
    assert head is not None and head.updated_at == expected and head.updated_at.tzinfo is UTC


async def test_core_times_from_a_naive_backend_read_back_as_aware_utc() -> None:
    naive_db = await init_repository(driver.in_memory_client(tz_aware=False)["naive"])
    cores = MemoryCoreRepository(naive_db)
    core = await cores.get_or_create("c", now=datetime(2024, 6, 1, 12, 0, 0, 500500, tzinfo=UTC))
    again = await cores.get("c")
    for value in (core, again):
        assert isinstance(value, MemoryCore)
        assert value.session_started_at == datetime(2024, 6, 1, 12, 0, 0, 500000, tzinfo=UTC)
        assert value.session_started_at.tzinfo is UTC


async def test_stored_times_round_trip_exactly(memory_db: Any) -> None:
    repository = MemoryUnitRepository(memory_db)
    created = datetime(2024, 2, 29, 23, 59, 59, 999999, tzinfo=UTC)
    piece = await repository.append(
        "u", [Message(role="user", content="a")], "s", core_id="c", created_at=created
    )
    assert piece.created_at == datetime(2024, 2, 29, 23, 59, 59, 999000, tzinfo=UTC)
    assert piece.id is not None
    assert await repository.get_slice("u", piece.id) == piece
