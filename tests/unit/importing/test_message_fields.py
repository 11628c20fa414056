"""Partner's importer maps what a Partner message carries beyond role and content (issue 20): the tool role,
name, tool_call_id, metadata and its time; a value that cannot be stored costs that value, not the message."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from partner_repo import ImportReport, MemoryUnitRepository, Message, import_partner_state

MS = 1_709_280_000_000  # 2024-03-01T08:00:00Z in epoch milliseconds
AT = datetime(2024, 3, 1, 8, 0, tzinfo=UTC)
CALL = {"name": "weather", "args": {"city": "Kyoto"}, "id": "call_1"}


def state_with(tmp_path: Path, messages: list[Any]) -> Path:
    root = tmp_path / "state"
    (root / "core" / "memory").mkdir(parents=True)
    (root / "core" / "memory.json").write_text(
        json.dumps({"memory_session_id": "u1", "memory_unit_uuid_set": ["u1"]}), encoding="utf-8"
    )
    unit = {"id": "u1", "update_timestamp": MS, "conversation_messages": messages, "memory_slices": []}
    (root / "core" / "memory" / "memory-unitu1.json").write_text(json.dumps(unit), encoding="utf-8")
    return root


async def import_and_read(
    tmp_path: Path, database: Any, messages: list[Any]
) -> tuple[ImportReport, list[Message]]:
    report = await import_partner_state(state_with(tmp_path, messages), database, core_id="partner")
    unit = await MemoryUnitRepository(database).get("u1")
    assert unit is not None
    return report, unit.conversation_messages


async def test_tool_messages_names_metadata_and_times_are_imported(tmp_path: Path, database: Any) -> None:
    _, messages = await import_and_read(
        tmp_path,
        database,
        [
            {"role": "user", "content": "Weather in Kyoto?", "name": "ada", "timestamp": MS},
            {"role": "assistant", "content": "", "metadata": {"tool_calls": [CALL]}, "created_timestamp": MS},
            {"role": "tool", "content": "18 C", "name": "weather", "tool_call_id": "call_1"},
        ],
    )

    assert messages == [
        Message(role="user", content="Weather in Kyoto?", name="ada"),
        Message(role="assistant", content="", metadata={"tool_calls": [CALL]}),
        Message(role="tool", content="18 C", name="weather", tool_call_id="call_1"),
    ]
    assert [m.at for m in messages] == [AT, AT, None]  # a message without a time is not given one


async def test_a_value_that_cannot_be_stored_is_dropped_and_noted_and_the_message_kept(
    tmp_path: Path, database: Any
) -> None:
    report, messages = await import_and_read(
        tmp_path,
        database,
        [
            {"role": "user", "content": "a", "name": " "},
            {"role": "tool", "content": "b", "tool_call_id": 7},
            {"role": "assistant", "content": "c", "metadata": ["not", "an", "object"]},
            {"role": "user", "content": "d", "timestamp": 1e300},
        ],
    )

    assert messages == [
        Message(role="user", content="a"),
        Message(role="tool", content="b"),
        Message(role="assistant", content="c"),
        Message(role="user", content="d"),
    ]
    assert messages[3].at is None
    noted = [f"{issue.item}: {issue.reason}" for issue in report.warnings + report.skipped]
    assert [line.split(":")[0] for line in noted] == ["message 0", "message 1", "message 2", "message 3"]
    assert all(line.endswith(("imported without it", "imported without a time")) for line in noted)


async def test_a_message_whose_time_cannot_be_read_is_counted_and_noted(
    tmp_path: Path, database: Any
) -> None:
    report, messages = await import_and_read(
        tmp_path,
        database,
        [
            {"role": "user", "content": "a", "timestamp": "2024-03-01T08:00:00Z"},
            {"role": "assistant", "content": "b", "created_timestamp": {"ms": MS}},
            {"role": "user", "content": "c", "timestamp": True},
            {"role": "assistant", "content": "d"},  # no time at all: counted, not noted
            {"role": "user", "content": "e", "timestamp": "soon", "created_timestamp": MS},  # the other one
        ],
    )

    assert [m.at for m in messages] == [None, None, None, None, AT]
    assert report.messages_without_time == 4
    noted = {issue.item: issue.reason for issue in report.warnings + report.skipped}
    assert noted == {
        "message 0": 'timestamp "2024-03-01T08:00:00Z" is not a time (epoch milliseconds, a number); '
        "imported without a time",
        "message 1": 'created_timestamp {"ms": 1709280000000} is not a time (epoch milliseconds, a number); '
        "imported without a time",
        "message 2": "timestamp true is not a time (epoch milliseconds, a number); imported without a time",
    }
