"""``partner-repo mcp --in-memory`` over stdio, as an agent host runs it: a subprocess driven by the official
SDK's client, which negotiates the protocol's current revision (2026-07-28) and checks every structured
result against the tool's output schema. One server for the module (its window rolls at four messages);
each test keeps to cores of its own."""

from __future__ import annotations

import json
import tempfile
from collections.abc import AsyncIterator
from typing import Any

import pytest
import pytest_asyncio
from mcp import Client

from tests.unit.mcp.support import HeldClient, error_line, record_turns, stdio_server, structured, turn

pytestmark = pytest.mark.asyncio(loop_scope="module")

PUPPY = turn("I adopted a puppy, a beagle called Biscuit.", "Beagles love long walks!", name="Caroline")
FOOD = turn("Any vegetarian food near Nishiki Market?", "Try shojin ryori, Buddhist temple food.")
RAMEN = turn("And ramen?", "Several ramen shops there make a vegetarian broth.")


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def client() -> AsyncIterator[Client]:
    with tempfile.TemporaryFile("w+") as errlog:
        held = HeldClient(lambda: Client(stdio_server(errlog)))
        yield await held.start()
        await held.stop()


async def test_the_server_lists_its_five_tools_with_their_schemas(client: Client) -> None:
    tools = {tool.name: tool for tool in (await client.list_tools()).tools}

    assert client.protocol_version == "2026-07-28"
    assert list(tools) == ["record_turn", "recall", "context", "topics", "forget"]
    required = {name: tool.input_schema.get("required") for name, tool in tools.items()}
    assert required == {
        "record_turn": ["core_id", "messages"],
        "recall": ["core_id", "query"],
        "context": ["core_id"],
        "topics": ["core_id"],
        "forget": ["core_id"],
    }
    outputs = {
        name: sorted(tool.output_schema["properties"]) for name, tool in tools.items() if tool.output_schema
    }
    assert outputs == {
        "record_turn": ["slice_id", "window_size"],
        "recall": ["slices"],
        "context": ["summaries", "window"],
        "topics": ["nodes"],
        "forget": ["erased", "removed", "would_erase"],
    }
    read_only = {name for name, tool in tools.items() if tool.annotations and tool.annotations.read_only_hint}
    assert read_only == {"recall", "context", "topics"}
    assert tools["forget"].annotations is not None and tools["forget"].annotations.destructive_hint


async def test_turns_recorded_until_a_roll_are_what_recall_and_context_return(client: Client) -> None:
    first, second, third = await record_turns(client, "caroline", [PUPPY, FOOD, RAMEN])

    assert first == {"window_size": 2, "slice_id": None}
    assert second["slice_id"] is not None and second["window_size"] == 0  # four messages rolled
    assert third == {"window_size": 2, "slice_id": None}
    recalled = structured(
        await client.call_tool("recall", {"core_id": "caroline", "query": "the puppy's name?"})
    )
    (found,) = recalled["slices"]
    assert found["slice_id"] == second["slice_id"]
    assert [message["content"] for message in found["messages"]] == [m["content"] for m in PUPPY + FOOD]
    assert found["messages"][0] == {"role": "user", "content": PUPPY[0]["content"], "name": "Caroline"}
    assert set(found) == {"slice_id", "unit_id", "summary", "day", "topic", "score", "messages"}
    context = structured(await client.call_tool("context", {"core_id": "caroline"}))
    assert [summary["slice_id"] for summary in context["summaries"]] == [second["slice_id"]]
    assert "Biscuit" in context["summaries"][0]["summary"]
    assert context["window"] == [{"name": None, **message} for message in RAMEN]


async def test_context_puts_the_latest_summaries_newest_last_then_the_window(client: Client) -> None:
    rolls = await record_turns(client, "daniel", [PUPPY, FOOD, RAMEN, PUPPY, FOOD, RAMEN, FOOD])
    slices = [roll["slice_id"] for roll in rolls if roll["slice_id"] is not None]

    context = structured(await client.call_tool("context", {"core_id": "daniel", "slices": 2}))

    assert len(slices) == 3
    assert [summary["slice_id"] for summary in context["summaries"]] == slices[-2:]
    assert [message["content"] for message in context["window"]] == [m["content"] for m in FOOD]


async def test_topics_are_the_tree_the_rolls_were_filed_under(client: Client) -> None:
    await record_turns(client, "erin", [PUPPY, FOOD])

    nodes = structured(await client.call_tool("topics", {"core_id": "erin"}))["nodes"]

    assert nodes and all(set(node) == {"path", "slices"} and node["slices"] == 1 for node in nodes)
    roots = [node for node in nodes if "->" not in node["path"]]
    assert len(roots) == 1 and all(node["path"].startswith(roots[0]["path"]) for node in nodes)


@pytest.mark.parametrize(
    ("arguments", "says"),
    [
        (
            {"messages": [{"role": "bot", "content": "hi"}]},
            "InvalidInput: invalid arguments: messages.0.role",
        ),
        (
            {"messages": [{"role": "user"}]},
            "InvalidInput: invalid arguments: messages.0.content: Field required",
        ),
        (
            {"messages": [{"role": "user", "content": "hi", "name": " "}]},
            "InvalidInput: invalid message: 0.name",
        ),
        ({"messages": "hello"}, "InvalidInput: invalid arguments: messages: Input should be a valid list"),
        ({"messages": []}, "InvalidInput: invalid arguments: messages: Value should have at least 1 item"),
        (
            {"messages": [{"role": "user", "content": "hi"}], "at": "last tuesday"},
            "InvalidInput: invalid arguments: at: 'last tuesday' is not an ISO 8601 date",
        ),
        (
            {"messages": [{"role": "user", "content": "x" * (1024 * 1024)}]},
            "InvalidInput: the turn is 1048610 bytes; this server records at most 1048576 bytes a turn",
        ),
    ],
    ids=["unknown-role", "no-content", "blank-name", "not-a-list", "no-message", "bad-date", "too-large"],
)
async def test_bad_input_is_a_one_line_tool_error_that_writes_nothing(
    client: Client, arguments: dict[str, Any], says: str
) -> None:
    await record_turns(client, "frank", [PUPPY])

    refused = await client.call_tool("record_turn", {"core_id": "frank", **arguments})

    assert error_line(refused).startswith(says)
    window = structured(await client.call_tool("context", {"core_id": "frank"}))["window"]
    assert len(window) == 2  # only the turn recorded first: the refused one wrote nothing
    await client.call_tool("forget", {"core_id": "frank", "confirm": True})


async def test_after_a_tool_error_the_server_keeps_serving(client: Client) -> None:
    bad_date = await client.call_tool("recall", {"core_id": "gina", "query": "x", "since": "2026-13-40"})
    bad_limit = await client.call_tool("recall", {"core_id": "gina", "query": "x", "limit": 0})

    assert error_line(bad_date).startswith("InvalidInput: invalid arguments: since: '2026-13-40' is not")
    assert error_line(bad_limit) == (
        "InvalidInput: invalid arguments: limit: Input should be greater than or equal to 1"
    )
    assert (await record_turns(client, "gina", [PUPPY])) == [{"window_size": 2, "slice_id": None}]


async def test_forget_previews_then_erases_and_recall_returns_nothing_of_it(client: Client) -> None:
    await record_turns(client, "hana", [PUPPY, FOOD, RAMEN])
    query = {"core_id": "hana", "query": "the beagle called Biscuit"}
    assert structured(await client.call_tool("recall", query))["slices"]

    preview = structured(await client.call_tool("forget", {"core_id": "hana"}))
    still = structured(await client.call_tool("recall", query))["slices"]
    erased = structured(await client.call_tool("forget", {"core_id": "hana", "confirm": True}))

    assert preview == {
        "erased": False,
        "would_erase": {
            "window_messages": 2,
            "units": 1,
            "slices": 1,
            "messages": 4,
            "checkpoints": 0,
            "dead_letters": 0,
        },
        "removed": None,
    }
    assert still  # the preview erased nothing
    assert erased["erased"] is True and erased["would_erase"] is None
    assert {key: value for key, value in erased["removed"].items() if key != "erasure_id"} == {
        "window_messages": 2,
        "units": 1,
        "slices": 1,
        "checkpoints": 0,
        "dead_letters": 0,
    }
    assert structured(await client.call_tool("recall", query)) == {"slices": []}
    assert structured(await client.call_tool("context", {"core_id": "hana"})) == {
        "summaries": [],
        "window": [],
    }
    assert structured(await client.call_tool("topics", {"core_id": "hana"})) == {"nodes": []}


async def test_a_list_sent_as_a_json_string_is_read_as_the_list(client: Client) -> None:
    messages = json.dumps(turn("Is the list read?", "Yes."))

    recorded = structured(await client.call_tool("record_turn", {"core_id": "ivan", "messages": messages}))

    assert recorded == {"window_size": 2, "slice_id": None}
