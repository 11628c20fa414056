"""PartnerChatMessageHistory against langchain-core's own interface: BaseChatMessageHistory's methods and
RunnableWithMessageHistory driving it (issue 20)."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from langchain_core.chat_history import BaseChatMessageHistory
from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
from langchain_core.messages import (
    AIMessage,
    BaseMessage,
    ChatMessage,
    HumanMessage,
    SystemMessage,
    ToolMessage,
)
from langchain_core.prompts import ChatPromptTemplate, MessagesPlaceholder
from langchain_core.runnables.history import RunnableWithMessageHistory

from partner_repo import (
    InvalidInput,
    MemoryCoreRepository,
    MemoryUnitRepository,
    RollingConfig,
    RollingService,
)
from partner_repo.langchain import PartnerChatMessageHistory
from partner_repo.langchain._history import SUMMARIES_HEADER
from tests.unit.rolling.support import RecordingSummarizer

CALL = {"name": "weather", "args": {"city": "Kyoto"}, "id": "call_1", "type": "tool_call"}
TURN: list[BaseMessage] = [
    HumanMessage(content="Weather in Kyoto?"),
    AIMessage(content="", tool_calls=[CALL]),
    ToolMessage(content="18 C, clear", tool_call_id="call_1", name="weather"),
    AIMessage(content="18 C and clear."),
]


def history_of(database: Any, *, trigger_limit: int = 36, summaries: int = 0) -> PartnerChatMessageHistory:
    rolling = RollingService(database, RecordingSummarizer(), RollingConfig(trigger_limit=trigger_limit))
    return PartnerChatMessageHistory(database, "agent", rolling=rolling, summaries=summaries)


def test_it_is_a_langchain_chat_message_history() -> None:
    assert issubclass(PartnerChatMessageHistory, BaseChatMessageHistory)
    assert not getattr(PartnerChatMessageHistory, "__abstractmethods__", None)


async def test_added_messages_are_read_back_from_the_window(database: Any) -> None:
    history = history_of(database)

    await history.aadd_messages(TURN)

    assert await history.aget_messages() == TURN
    assert len(await MemoryCoreRepository(database).snapshot("agent")) == 4


async def test_a_turn_that_meets_the_trigger_is_rolled_into_the_unit(database: Any) -> None:
    history = history_of(database, trigger_limit=4)
    session = await MemoryCoreRepository(database).session_id("agent")

    await history.aadd_messages(TURN)

    unit = await MemoryUnitRepository(database).get(session)
    assert unit is not None and len(unit.conversation_messages) == 4 and len(unit.slices) == 1
    assert await history.aget_messages() == []  # the default retain_divisor 6 keeps 4 // 6 = 0 of them


async def test_clear_empties_the_window_and_keeps_the_summarized_memory(database: Any) -> None:
    history = history_of(database, trigger_limit=4)
    session = await MemoryCoreRepository(database).session_id("agent")
    await history.aadd_messages(TURN)
    await history.aadd_messages([HumanMessage(content="And tomorrow?")])

    await history.aclear()

    assert await history.aget_messages() == []
    unit = await MemoryUnitRepository(database).get(session)
    assert unit is not None and len(unit.slices) == 1


async def test_with_summaries_the_latest_summaries_come_first(database: Any) -> None:
    history = history_of(database, trigger_limit=4, summaries=2)
    for _ in range(3):
        await history.aadd_messages(TURN)
    await history.aadd_messages([HumanMessage(content="And tomorrow?")])

    first, *window = await history.aget_messages()

    assert isinstance(first, SystemMessage) and first.content.startswith(SUMMARIES_HEADER)
    assert first.content.count("\n- summary of") == 2
    assert window == [HumanMessage(content="And tomorrow?")]


async def test_a_turn_with_a_message_that_cannot_be_stored_writes_nothing(database: Any) -> None:
    history = history_of(database)
    await history.aadd_messages([HumanMessage(content="kept")])

    with pytest.raises(InvalidInput):
        await history.aadd_messages([HumanMessage(content="fine"), ChatMessage(role="critic", content="meh")])

    assert await history.aget_messages() == [HumanMessage(content="kept")]


async def test_runnable_with_message_history_keeps_the_conversation_in_the_core(memory_db: Any) -> None:
    rolling = RollingService(memory_db, RecordingSummarizer())
    model = GenericFakeChatModel(messages=iter(["Hello, Ada.", "You are Ada."]))
    prompt = ChatPromptTemplate.from_messages([MessagesPlaceholder("history"), ("human", "{question}")])
    chain = RunnableWithMessageHistory(
        prompt | model,
        lambda session_id: PartnerChatMessageHistory(memory_db, session_id, rolling=rolling),
        input_messages_key="question",
        history_messages_key="history",
    )
    config: Any = {"configurable": {"session_id": "agent-7"}}

    await chain.ainvoke({"question": "I am Ada."}, config=config)
    answer = await chain.ainvoke({"question": "Who am I?"}, config=config)

    assert answer.content == "You are Ada."
    window = await MemoryCoreRepository(memory_db).snapshot("agent-7")
    assert [(m.role, m.content) for m in window] == [
        ("user", "I am Ada."),
        ("assistant", "Hello, Ada."),
        ("user", "Who am I?"),
        ("assistant", "You are Ada."),
    ]


async def test_the_sync_methods_work_from_a_worker_thread_while_the_loop_runs(memory_db: Any) -> None:
    history = history_of(memory_db)

    await asyncio.to_thread(history.add_messages, TURN[:1])
    read = await asyncio.to_thread(lambda: history.messages)
    await asyncio.to_thread(history.clear)

    assert read == TURN[:1]
    assert await history.aget_messages() == []


async def test_the_sync_methods_refuse_to_block_the_event_loop(memory_db: Any) -> None:
    history = history_of(memory_db)

    with pytest.raises(RuntimeError, match="await aget_messages"):
        _ = history.messages
    with pytest.raises(RuntimeError, match="await aadd_messages"):
        history.add_messages(TURN)


@pytest.mark.parametrize(
    ("arguments", "message"),
    [({"rolling": None}, "rolling must be a RollingService"), ({"summaries": -1}, "summaries")],
)
async def test_a_history_refuses_a_bad_configuration(
    memory_db: Any, arguments: dict[str, Any], message: str
) -> None:
    given: dict[str, Any] = {"rolling": RollingService(memory_db, RecordingSummarizer()), **arguments}

    with pytest.raises(InvalidInput, match=message):
        PartnerChatMessageHistory(memory_db, "agent", **given)
