"""What a turn can hold (issue 20): the tool role, name, tool_call_id, metadata and each message's own time,
recorded, rolled into a unit and handed to consumers; plain and old messages stored and read as before."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest

from partner_repo import (
    InvalidInput,
    MemoryCoreRepository,
    MemoryUnitRepository,
    Message,
    RollingConfig,
    RollingService,
)
from partner_repo.encoding import MAX_METADATA_BYTES
from partner_repo.mongo import CORES, UNITS, bson_size
from partner_repo.validation import parse_messages
from tests.unit.rolling.support import T0, RecordingSummarizer

CALL = {"name": "weather", "args": {"city": "Kyoto"}, "id": "call_1", "type": "tool_call"}


def tool_turn() -> list[Message]:
    """A tool-using exchange: the question, the call, the tool's answer, the reply."""
    return [
        Message(role="user", content="Weather in Kyoto?", name="ada"),
        Message(role="assistant", content="", metadata={"tool_calls": [CALL]}),
        Message(role="tool", content="18 C, clear", name="weather", tool_call_id="call_1"),
        Message(role="assistant", content="18 C and clear.", metadata={"usage": {"tokens": 31}}),
    ]


async def stored_window(database: Any, core_id: str) -> list[dict[str, Any]]:
    document = await database[CORES].find_one({"_id": core_id})
    return list(document["chat_messages"])


# -- the stored form ----------------------------------------------------------------------------------------


async def test_a_plain_message_is_stored_as_role_content_and_the_time_of_its_turn(database: Any) -> None:
    await MemoryCoreRepository(database).record("agent", [Message(role="user", content="hi")], at=T0)

    (stored,) = await stored_window(database, "agent")

    assert set(stored) == {"role", "content", "at"}
    assert (stored["role"], stored["content"]) == ("user", "hi")


async def test_record_gives_each_message_without_a_time_the_time_of_its_turn(database: Any) -> None:
    cores = MemoryCoreRepository(database)
    await cores.record("agent", [Message(role="user", content="a")], at=T0)
    await cores.record("agent", [{"role": "assistant", "content": "b"}], at=T0 + timedelta(seconds=5))

    window = await cores.snapshot("agent")

    assert [m.at for m in window] == [T0, T0 + timedelta(seconds=5)]


async def test_record_keeps_the_time_a_caller_gives_a_message(database: Any) -> None:
    cores = MemoryCoreRepository(database)
    said = T0 - timedelta(days=3)
    await cores.record("agent", [Message(role="user", content="from a transcript", at=said)], at=T0)

    (message,) = await cores.snapshot("agent")

    assert message.at == said
    assert (await cores.window_state("agent")).last_interaction_at == T0  # type: ignore[union-attr]


async def test_the_optional_fields_are_left_out_of_the_stored_form_while_unset(database: Any) -> None:
    turn = [
        Message(role="tool", content="42", tool_call_id="call_9"),
        Message(role="user", content="x", name="ada"),
    ]
    await MemoryCoreRepository(database).record("agent", turn, at=T0)

    stored = await stored_window(database, "agent")

    assert [set(m) for m in stored] == [
        {"role", "content", "tool_call_id", "at"},
        {"role", "content", "name", "at"},
    ]


# -- record, roll, unit, result -----------------------------------------------------------------------------


async def test_tool_messages_round_trip_through_the_window_the_unit_and_the_rolling_result(
    database: Any,
) -> None:
    service = RollingService(database, RecordingSummarizer(), RollingConfig(trigger_limit=4))
    session = await MemoryCoreRepository(database).session_id("agent")

    result = await service.record_and_roll("agent", tool_turn(), at=T0)

    assert result is not None
    assert list(result.increment_messages) == tool_turn()
    assert [m.at for m in result.increment_messages] == [T0] * 4
    unit = await MemoryUnitRepository(database).get(session)
    assert unit is not None and unit.conversation_messages == tool_turn()
    assert [m.at for m in unit.conversation_messages] == [T0] * 4
    assert unit.conversation_messages[1].metadata == {"tool_calls": [CALL]}
    assert (unit.conversation_messages[2].name, unit.conversation_messages[2].tool_call_id) == (
        "weather",
        "call_1",
    )


async def test_the_unit_a_roll_writes_counts_the_new_fields_in_its_exact_size(database: Any) -> None:
    service = RollingService(database, RecordingSummarizer(), RollingConfig(trigger_limit=4))
    session = await MemoryCoreRepository(database).session_id("agent")
    await service.record_and_roll("agent", tool_turn(), at=T0)
    await service.record_and_roll("agent", tool_turn()[::-1], at=T0 + timedelta(minutes=1))

    stored = await database[UNITS].find_one({"_id": session})

    assert stored["message_count"] == 8 and stored["size_bytes"] == bson_size(stored)


# -- metadata that is refused -------------------------------------------------------------------------------

REFUSED_METADATA = {
    "too big": {"blob": "x" * MAX_METADATA_BYTES},
    "not JSON": {"when": T0},
    "not JSON (NaN)": {"score": float("nan")},
    "not an object": ["a", "list"],
    "a key MongoDB reads as an operator": {"$set": 1},
    "a key that is not a string": {1: "one"},
    "an integer past 64 bits": {"big": 2**64},
}


@pytest.mark.parametrize("case", list(REFUSED_METADATA))
async def test_metadata_that_is_no_small_json_object_is_refused_and_nothing_is_written(
    database: Any, case: str
) -> None:
    cores = MemoryCoreRepository(database)
    await cores.record("agent", [Message(role="user", content="before")], at=T0)
    turn = [
        {"role": "user", "content": "ok"},
        {"role": "assistant", "content": "x", "metadata": REFUSED_METADATA[case]},
    ]

    with pytest.raises(InvalidInput, match="metadata"):
        await cores.record("agent", turn)

    assert [m.content for m in await cores.snapshot("agent")] == ["before"]


def test_metadata_up_to_the_bound_is_accepted() -> None:
    filler = "x" * (MAX_METADATA_BYTES - len('{"blob":""}'))

    assert Message(role="user", content="", metadata={"blob": filler}).metadata == {"blob": filler}


def test_a_message_keeps_its_own_copy_of_the_metadata() -> None:
    given: dict[str, Any] = {"tags": ["a"]}
    message = Message(role="user", content="x", metadata=given)

    given["tags"].append("b")

    assert message.metadata == {"tags": ["a"]}


# -- equality -----------------------------------------------------------------------------------------------


def test_messages_are_equal_whatever_their_time_and_differ_by_any_other_field() -> None:
    plain = Message(role="assistant", content="x")

    assert Message(role="assistant", content="x", at=T0) == plain
    assert hash(Message(role="assistant", content="x", at=T0)) == hash(plain)
    for other in (
        Message(role="assistant", content="x", name="bot"),
        Message(role="assistant", content="x", tool_call_id="c"),
        Message(role="assistant", content="x", metadata={"k": 1}),
    ):
        assert other != plain


def test_a_message_with_metadata_is_hashable_and_immutable() -> None:
    message = Message(role="assistant", content="", metadata={"tool_calls": [CALL]})

    assert {message, Message(role="assistant", content="", metadata={"tool_calls": [dict(CALL)]})} == {
        message
    }
    with pytest.raises(AttributeError):
        message.metadata = None  # type: ignore[misc]


def test_a_message_shows_only_the_fields_that_are_set() -> None:
    assert repr(Message(role="tool", content="42", tool_call_id="c1")) == (
        "Message(role='tool', content='42', tool_call_id='c1')"
    )


@pytest.mark.parametrize("field", ["name", "tool_call_id"])
@pytest.mark.parametrize("value", ["", " ", "x" * 257, 7])
def test_a_name_or_tool_call_id_is_a_short_non_blank_string(field: str, value: object) -> None:
    with pytest.raises(InvalidInput, match=field):
        parse_messages([{"role": "tool", "content": "x", field: value}])


# -- messages stored before 0.4 -----------------------------------------------------------------------------


async def test_messages_stored_before_the_new_fields_read_and_roll_as_before(database: Any) -> None:
    old = [{"role": "user", "content": f"old {n}"} for n in range(3)]
    await database[CORES].insert_one(
        {
            "_id": "agent",
            "memory_session_id": "s-old",
            "session_started_at": T0,
            "chat_messages": old,
            "last_interaction_at": T0,
        }
    )
    cores = MemoryCoreRepository(database)

    window = await cores.snapshot("agent")
    await cores.record("agent", [Message(role="assistant", content="new")], at=T0 + timedelta(minutes=1))
    result = await RollingService(database, RecordingSummarizer()).roll("agent")

    assert window == [Message(role="user", content=f"old {n}") for n in range(3)]
    assert all(m.name is m.tool_call_id is m.metadata is m.at is None for m in window)
    assert result is not None
    assert [m.at for m in result.increment_messages] == [None, None, None, T0 + timedelta(minutes=1)]
    unit = await database[UNITS].find_one({"_id": "s-old"})
    assert unit["conversation_messages"][:3] == old  # stored exactly as they were
