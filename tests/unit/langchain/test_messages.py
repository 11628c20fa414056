"""Conversions between Message and langchain-core's messages, both ways, tool calls included (issue 20)."""

from __future__ import annotations

import logging

import pytest
from langchain_core.messages import (
    AIMessage,
    AIMessageChunk,
    BaseMessage,
    ChatMessage,
    HumanMessage,
    RemoveMessage,
    SystemMessage,
    ToolMessage,
)

from partner_repo import InvalidInput, Message
from partner_repo.encoding import MAX_METADATA_BYTES
from partner_repo.langchain import from_langchain, to_langchain

CALL = {"name": "weather", "args": {"city": "Kyoto"}, "id": "call_1", "type": "tool_call"}

ROUND_TRIPS: dict[str, BaseMessage] = {
    "a human message": HumanMessage(content="Weather in Kyoto?", name="ada", id="m1"),
    "a system message": SystemMessage(content="Be brief."),
    "an AI message with tool calls": AIMessage(
        content="",
        tool_calls=[CALL],
        usage_metadata={"input_tokens": 12, "output_tokens": 9, "total_tokens": 21},
        response_metadata={"model_name": "gpt-test", "finish_reason": "tool_calls"},
        id="run-1",
    ),
    "an AI message with an invalid tool call": AIMessage(
        content="",
        invalid_tool_calls=[
            {
                "name": "weather",
                "args": "{city",
                "id": "call_2",
                "error": "bad JSON",
                "type": "invalid_tool_call",
            }
        ],
    ),
    "a tool message": ToolMessage(content="18 C, clear", tool_call_id="call_1", name="weather"),
    "a failed tool call with its artifact": ToolMessage(
        content="timeout", tool_call_id="call_1", status="error", artifact={"elapsed_s": 30}
    ),
    "multimodal content": HumanMessage(
        content=[
            {"type": "text", "text": "What is this? "},
            {"type": "image_url", "image_url": {"url": "https://x/y.png"}},
        ]
    ),
}


@pytest.mark.parametrize("case", list(ROUND_TRIPS))
def test_a_langchain_message_comes_back_the_same_from_its_message(case: str) -> None:
    original = ROUND_TRIPS[case]

    assert to_langchain(from_langchain(original)) == original


def test_an_ai_message_keeps_its_tool_calls_in_the_metadata() -> None:
    message = from_langchain(AIMessage(content="", tool_calls=[CALL], id="run-1"))

    assert message == Message(role="assistant", content="", metadata={"tool_calls": [CALL], "id": "run-1"})


def test_a_tool_message_keeps_its_call_id_and_name_as_fields() -> None:
    message = from_langchain(ToolMessage(content="18 C", tool_call_id="call_1", name="weather"))

    assert message == Message(role="tool", content="18 C", name="weather", tool_call_id="call_1")


@pytest.mark.parametrize(
    ("message", "expected"),
    [
        (Message(role="user", content="hi", name="ada"), HumanMessage(content="hi", name="ada")),
        (Message(role="system", content="be brief"), SystemMessage(content="be brief")),
        (
            Message(role="assistant", content="", metadata={"tool_calls": [CALL]}),
            AIMessage(content="", tool_calls=[CALL]),
        ),
        (
            Message(role="tool", content="18 C", name="weather", tool_call_id="call_1"),
            ToolMessage(content="18 C", name="weather", tool_call_id="call_1"),
        ),
    ],
)
def test_each_role_becomes_its_langchain_message(message: Message, expected: BaseMessage) -> None:
    assert to_langchain(message) == expected


def test_metadata_of_other_code_reaches_langchain_in_additional_kwargs() -> None:
    converted = to_langchain(Message(role="user", content="hi", metadata={"channel": "sms"}))

    assert converted == HumanMessage(content="hi", additional_kwargs={"channel": "sms"})


def test_tool_calls_in_openais_shape_are_parsed_by_langchain() -> None:
    raw = {
        "id": "call_1",
        "type": "function",
        "function": {"name": "weather", "arguments": '{"city": "Kyoto"}'},
    }

    converted = to_langchain(Message(role="assistant", content="", metadata={"tool_calls": [raw]}))

    assert isinstance(converted, AIMessage)
    assert converted.tool_calls == [CALL]


def test_list_content_is_stored_as_its_text_with_the_blocks_in_the_metadata() -> None:
    blocks = [{"type": "text", "text": "What is "}, "this?", {"type": "image_url", "image_url": {"url": "u"}}]

    message = from_langchain(HumanMessage(content=blocks))

    assert message.content == "What is this?" and message.metadata == {"content": blocks}


def test_chunks_and_chat_messages_of_a_known_role_are_converted() -> None:
    assert from_langchain(AIMessageChunk(content="par", id="c1")) == Message(
        role="assistant", content="par", metadata={"id": "c1"}
    )
    assert from_langchain(ChatMessage(role="human", content="hi")) == Message(role="user", content="hi")


@pytest.mark.parametrize(
    "message",
    [ChatMessage(role="critic", content="meh"), RemoveMessage(id="m1")],
    ids=["unknown role", "remove"],
)
def test_a_langchain_message_without_a_role_here_is_refused(message: BaseMessage) -> None:
    with pytest.raises(InvalidInput, match="no role in memory"):
        from_langchain(message)


def test_tool_calls_past_the_metadata_bound_are_refused() -> None:
    call = {**CALL, "args": {"text": "x" * MAX_METADATA_BYTES}}

    with pytest.raises(InvalidInput, match="bytes of JSON"):
        from_langchain(AIMessage(content="", tool_calls=[call]))


def test_an_artifact_that_is_not_json_is_refused() -> None:
    with pytest.raises(InvalidInput, match="not JSON"):
        from_langchain(ToolMessage(content="done", tool_call_id="c", artifact=object()))


def test_response_metadata_past_the_bound_is_dropped_and_logged(caplog: pytest.LogCaptureFixture) -> None:
    chatty = AIMessage(
        content="ok", tool_calls=[CALL], response_metadata={"logprobs": ["x" * MAX_METADATA_BYTES]}
    )

    with caplog.at_level(logging.WARNING, logger="partner_repo.langchain.messages"):
        message = from_langchain(chatty)

    assert message.metadata == {"tool_calls": [CALL]}
    assert "stored without its response_metadata" in caplog.text
