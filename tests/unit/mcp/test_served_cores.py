"""``partner-repo mcp --core alice --core bob`` over stdio, reached by a client of the protocol's previous
revision: the SDK's client in ``legacy`` mode runs the ``initialize`` handshake at 2025-11-25, as every host
written before the 2026-07-28 revision does. The server serves those two cores and refuses every other id
with a tool error, before anything is read or written."""

from __future__ import annotations

import tempfile
from collections.abc import AsyncIterator

import pytest
import pytest_asyncio
from mcp import Client

from tests.unit.mcp.support import HeldClient, error_line, record_turns, stdio_server, structured, turn

pytestmark = pytest.mark.asyncio(loop_scope="module")

REFUSED = "InvalidInput: core 'carol' is not served here: this server serves only the cores it was given"


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def client() -> AsyncIterator[Client]:
    with tempfile.TemporaryFile("w+") as errlog:
        server = stdio_server(errlog, "--core", "alice", "--core", "bob")
        held = HeldClient(lambda: Client(server, mode="legacy"))
        yield await held.start()
        await held.stop()


async def test_a_client_of_the_previous_revision_negotiates_it(client: Client) -> None:
    assert client.protocol_version == "2025-11-25"
    assert client.server_info is not None and client.server_info.name == "partner-repo"


async def test_the_served_cores_are_served(client: Client) -> None:
    recorded = await record_turns(client, "alice", [turn("Hello, I'm Alice.", "Hi Alice!")])
    context = structured(await client.call_tool("context", {"core_id": "alice"}))

    assert recorded == [{"window_size": 2, "slice_id": None}]
    assert [message["content"] for message in context["window"]] == ["Hello, I'm Alice.", "Hi Alice!"]
    assert structured(await client.call_tool("topics", {"core_id": "bob"})) == {"nodes": []}


@pytest.mark.parametrize(
    "call",
    [
        ("record_turn", {"messages": turn("Hi", "Hello")}),
        ("recall", {"query": "anything"}),
        ("context", {}),
        ("topics", {}),
        ("forget", {"confirm": True}),
    ],
    ids=lambda call: call[0],
)
async def test_every_tool_refuses_another_core(client: Client, call: tuple[str, dict[str, object]]) -> None:
    name, arguments = call

    refused = await client.call_tool(name, {"core_id": "carol", **arguments})

    assert error_line(refused) == REFUSED
