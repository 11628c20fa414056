"""The MCP tools in process, on every backend (the in-memory one, and MongoDB when ``MONGODB_URI`` names
one): the SDK's client connected to the server object itself, no transport in between. What the stdio and
HTTP tests cannot reach from outside: what a refusal leaves in the database, a roll whose indexing fails,
failures that are not the caller's, and what a tool error may show."""

from __future__ import annotations

import asyncio
import logging
from datetime import UTC, datetime
from typing import Any

import pytest
from mcp import Client, MCPError

from partner_repo import MemoryCoreRepository, MemoryUnitRepository, RollingConfig, RollingService
from partner_repo.errors import ConnectionFailed, InvalidInput
from partner_repo.mcp import MemoryTools, memory_server
from partner_repo.mcp._arguments import ForgetArguments, RecordTurnArguments, TopicsArguments
from partner_repo.mcp._results import TopicsResult
from partner_repo.mongo import RECALL_INDEX
from partner_repo.recall import RecallIndexer
from partner_repo.rolling import extractive_summarizer
from tests.unit.mcp.support import error_line, record_turns, structured, turn

pytestmark = pytest.mark.asyncio


def tools_on(database: Any, **options: Any) -> MemoryTools:
    rolling = RollingService(database, extractive_summarizer, RollingConfig(trigger_limit=4))
    return MemoryTools(database, rolling, **options)


def connected(database: Any) -> Client:
    """The SDK's client to a server serving only the core ``alice`` (to be entered by the test's own task:
    the client is an anyio context, which a fixture would leave from another task)."""
    return Client(memory_server(tools_on(database, cores=["alice"]), version="test"))


async def test_a_refused_core_is_neither_read_nor_written(database: Any) -> None:
    async with connected(database) as client:
        refused = await client.call_tool("record_turn", {"core_id": "carol", "messages": turn("Hi", "Hello")})

    assert error_line(refused).startswith("InvalidInput: core 'carol' is not served here")
    assert await MemoryCoreRepository(database).get("carol") is None


async def test_a_turn_keeps_the_time_it_was_given(database: Any) -> None:
    at = "2026-11-16T09:30:00+08:00"

    async with connected(database) as client:
        await client.call_tool("record_turn", {"core_id": "alice", "messages": turn("Hi", "Hello"), "at": at})

    stamps = {message.at for message in await MemoryCoreRepository(database).snapshot("alice")}
    assert stamps == {datetime(2026, 11, 16, 1, 30, tzinfo=UTC)}


@pytest.mark.parametrize("at", ["0001-01-01T00:00:00Z", "0001-01-01T00:00:00+14:00"])
async def test_a_turn_at_a_time_no_conversation_has_is_one_line_and_writes_nothing(
    database: Any, at: str
) -> None:
    async with connected(database) as client:
        refused = await client.call_tool(
            "record_turn", {"core_id": "alice", "messages": turn("Hi", "Hi"), "at": at}
        )

    assert error_line(refused).startswith("InvalidInput: ")
    assert "0001-01-01" in error_line(refused) and "\n" not in error_line(refused)
    assert await MemoryCoreRepository(database).get("alice") is None


async def test_context_is_newest_last_in_the_order_of_the_rolls_when_their_times_tie(database: Any) -> None:
    """A roll's time is raised to its unit's last slice's, so rolls of a lagging clock (here: every turn at
    one time) share one ``created_at``: the summaries still come in the order they were stored, not in the
    order of their random ids."""
    at = "2026-11-16T09:30:00Z"
    turns = [turn(f"question {n}", f"answer {n}") for n in range(12)]

    async with connected(database) as client:
        rolls = []
        for messages in turns:
            arguments = {"core_id": "alice", "messages": messages, "at": at}
            rolls.append(structured(await client.call_tool("record_turn", arguments)))
        context = structured(await client.call_tool("context", {"core_id": "alice", "slices": 10}))

    rolled = [result["slice_id"] for result in rolls if result["slice_id"] is not None]
    assert len(rolled) >= 4
    assert [summary["slice_id"] for summary in context["summaries"]] == rolled[-10:]


async def test_a_forget_landing_between_a_roll_and_its_indexing_leaves_nothing_erased_in_recall(
    database: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The server indexes a roll in process after ``record_and_roll`` released the core; a ``forget`` that
    lands in that gap (a slow topic extractor) must not be undone by the late index write: no listener runs
    here to remove it afterwards."""
    held, forgotten = asyncio.Event(), asyncio.Event()
    consume = RecallIndexer.consume

    async def slow(self: RecallIndexer, result: Any) -> None:
        held.set()
        await forgotten.wait()
        await consume(self, result)

    monkeypatch.setattr(RecallIndexer, "consume", slow)
    tools = tools_on(database, cores=["alice"])
    first, second = turn("My sister lives in Lyon.", "Nice"), turn("She plays piano.", "Lovely")
    await tools.record_turn(RecordTurnArguments(core_id="alice", messages=first))
    rolling = asyncio.create_task(tools.record_turn(RecordTurnArguments(core_id="alice", messages=second)))
    await held.wait()  # rolled and stored: its index write is what waits

    await tools.forget(ForgetArguments(core_id="alice", confirm=True))
    forgotten.set()
    await rolling

    assert await tools.topics(TopicsArguments(core_id="alice")) == TopicsResult(nodes=[])
    assert await database[RECALL_INDEX].count_documents({"core_id": "alice"}) == 0


async def test_a_roll_the_index_fails_on_is_still_answered_as_recorded(
    database: Any, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    async def broken(self: RecallIndexer, result: Any) -> None:
        raise RuntimeError("the index is down")

    monkeypatch.setattr(RecallIndexer, "consume", broken)

    async with connected(database) as client:
        rolls = await record_turns(client, "alice", [turn("One", "Two"), turn("Three", "Four")])

    slice_id = rolls[1]["slice_id"]
    assert slice_id is not None  # stored: an agent told otherwise would record the turn again
    assert await MemoryUnitRepository(database).list_units("alice")
    assert f"slice {slice_id} is stored but not indexed for recall" in caplog.text


async def test_a_library_error_is_its_class_and_message_with_credentials_masked(
    database: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    async def unreachable(self: MemoryTools, arguments: Any) -> Any:
        raise ConnectionFailed("cannot reach mongodb://partner:hunter2@db.internal:27017")

    monkeypatch.setattr(MemoryTools, "context", unreachable)

    async with connected(database) as client:
        failed = await client.call_tool("context", {"core_id": "alice"})

    assert error_line(failed) == "ConnectionFailed: cannot reach mongodb://partner:***@db.internal:27017"


async def test_an_unexpected_failure_names_only_its_type_is_logged_and_serving_goes_on(
    database: Any, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    async def crash(self: MemoryTools, arguments: Any) -> Any:
        raise KeyError("internal detail")

    monkeypatch.setattr(MemoryTools, "topics", crash)

    async with connected(database) as client:
        with caplog.at_level(logging.ERROR, logger="partner_repo.mcp"):
            failed = await client.call_tool("topics", {"core_id": "alice"})
        after = structured(await client.call_tool("context", {"core_id": "alice"}))

    assert error_line(failed) == "internal error (KeyError); the server logged it"
    assert "internal detail" in caplog.text
    assert after == {"summaries": [], "window": []}


async def test_a_tool_the_server_does_not_have_is_a_protocol_error(database: Any) -> None:
    async with connected(database) as client:
        with pytest.raises(MCPError) as unknown:
            await client.call_tool("remember_everything", {"core_id": "alice"})

    assert "Unknown tool: 'remember_everything'" in unknown.value.message


@pytest.mark.parametrize("bound", [0, 17 * 1024 * 1024, True])
async def test_the_turn_bound_is_at_most_the_librarys_own(database: Any, bound: int) -> None:
    with pytest.raises(InvalidInput, match="max_turn_bytes must be from 1 to"):
        tools_on(database, max_turn_bytes=bound)
